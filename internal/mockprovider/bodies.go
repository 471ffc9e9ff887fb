package mockprovider

import (
	"bytes"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"
)

// bodyLogSize is how many recent requests /_mock/stats reports.
const bodyLogSize = 1000

// bodyLog is a ring of the most recent request digests. Slots reuse their
// buffers, so recording a request does not allocate once the ring is warm;
// headers are stored raw and only turned into maps when stats are read.
type bodyLog struct {
	mu    sync.Mutex
	slots [bodyLogSize]bodySlot
	next  int
	count int
}

type bodySlot struct {
	seq   uint64
	path  []byte
	model string
	bytes int
	sum   [32]byte
	hdrs  []byte // name \x00 value \x00 pairs
}

func (l *bodyLog) add(seq uint64, path []byte, model string, size int, sum *[32]byte, h *fasthttp.RequestHeader) {
	l.mu.Lock()
	sl := &l.slots[l.next]
	sl.seq, sl.model, sl.bytes, sl.sum = seq, model, size, *sum
	sl.path = append(sl.path[:0], path...)
	sl.hdrs = sl.hdrs[:0]
	for k, v := range h.All() {
		sl.hdrs = append(sl.hdrs, k...)
		sl.hdrs = append(sl.hdrs, 0)
		sl.hdrs = append(sl.hdrs, v...)
		sl.hdrs = append(sl.hdrs, 0)
	}
	l.next = (l.next + 1) % bodyLogSize
	if l.count < bodyLogSize {
		l.count++
	}
	l.mu.Unlock()
}

func (l *bodyLog) records() []BodyRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]BodyRecord, 0, l.count)
	start := (l.next - l.count + bodyLogSize) % bodyLogSize
	for i := range l.count {
		sl := &l.slots[(start+i)%bodyLogSize]
		rec := BodyRecord{
			Seq: sl.seq, Path: string(sl.path), Model: sl.model, Bytes: sl.bytes,
			SHA256: hex.EncodeToString(sl.sum[:]), Headers: map[string]string{},
		}
		for rest := sl.hdrs; len(rest) > 0; {
			k, after, _ := bytes.Cut(rest, []byte{0})
			v, after2, _ := bytes.Cut(after, []byte{0})
			rest = after2
			name := strings.ToLower(string(k))
			if prev, ok := rec.Headers[name]; ok {
				rec.Headers[name] = prev + ", " + string(v)
			} else {
				rec.Headers[name] = string(v)
			}
		}
		out = append(out, rec)
	}
	return out
}

func (l *bodyLog) reset() {
	l.mu.Lock()
	l.next, l.count = 0, 0
	l.mu.Unlock()
}
