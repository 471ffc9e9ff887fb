package messages

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The cluster wire: every message between members is one envelope,
//
//	magic (0xC1) | version (1) | kind (ClusterKind) | payload
//
// and the payload is the kind's fields in a fixed order: unsigned and
// signed varints (the shortest form only), single bytes, float64 as 8
// little-endian bytes, strings and lists as a varint length and their
// items. Nothing is optional and nothing may follow the last field, so a
// message has exactly one encoding: DecodeCluster accepts b only if
// EncodeCluster of its result gives b back.
//
// The magic byte is no JSON text and no first byte of the formats before
// this one (a credit grain call began with its operation, 1 to 3, a reply
// with flags below 16, the quota and cooldown messages with '{'), so a
// message of a member running an older release is refused as such
// rather than read as something else. A mixed-version cluster is not
// supported: a member refuses a version it does not know, and says so.

const (
	wireMagic   = 0xC1
	wireVersion = 2
	wireHeader  = 3
)

// EncodeCluster encodes m for the remote layer, or says why it cannot (an
// invalid message, or one over the size limits).
func EncodeCluster(m ClusterMessage) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c := wireCodec{w: wireWriter{b: make([]byte, wireHeader, 64)}}
	w := &c.w
	w.b[0], w.b[1], w.b[2] = wireMagic, wireVersion, byte(m.ClusterKind())
	m.wire(&c)
	if w.err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrClusterMessage, m.ClusterKind(), w.err)
	}
	if len(w.b) > MaxClusterMessageBytes {
		return nil, fmt.Errorf("%w %s: %d bytes, more than %d", ErrClusterMessage, m.ClusterKind(), len(w.b), MaxClusterMessageBytes)
	}
	return w.b, nil
}

// DecodeCluster decodes one message from a peer. It returns a valid
// message or an error wrapping ErrClusterMessage that says what was
// wrong (no envelope, another version, an unknown kind, a payload cut
// short, too long or with bytes left over, an invalid value); it never
// panics and allocates no more than the bytes it was given justify.
func DecodeCluster(b []byte) (ClusterMessage, error) {
	switch {
	case len(b) > MaxClusterMessageBytes:
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrClusterMessage, len(b), MaxClusterMessageBytes)
	case len(b) < wireHeader || b[0] != wireMagic:
		return nil, fmt.Errorf("%w: not an envelope of this wire (a member of an older release?)", ErrClusterMessage)
	case b[1] != wireVersion:
		return nil, fmt.Errorf("%w: wire version %d, this member speaks %d (members of different releases?)", ErrClusterMessage, b[1], wireVersion)
	}
	k := ClusterKind(b[2])
	if k == 0 || k >= numClusterKinds {
		return nil, fmt.Errorf("%w: unknown kind %d", ErrClusterMessage, b[2])
	}
	m := clusterKinds[k].new()
	c := wireCodec{decoding: true, r: wireReader{b: b[wireHeader:]}}
	r := &c.r
	m.wire(&c)
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the last field", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrClusterMessage, k, r.err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// wireCodec walks a message's fields once for both directions: encoding,
// each call appends the field; decoding, it reads the field into place.
// A kind's field order is thus written once (its wire method) and the
// encoder and the decoder cannot disagree on it.
type wireCodec struct {
	decoding bool
	w        wireWriter
	r        wireReader
}

func (c *wireCodec) u8(v *uint8)       { wireField(c, v, (*wireReader).u8, (*wireWriter).u8) }
func (c *wireCodec) uvarint(v *uint64) { wireField(c, v, (*wireReader).uvarint, (*wireWriter).uvarint) }
func (c *wireCodec) varint(v *int64)   { wireField(c, v, (*wireReader).varint, (*wireWriter).varint) }
func (c *wireCodec) f64(v *float64)    { wireField(c, v, (*wireReader).f64, (*wireWriter).f64) }
func (c *wireCodec) str(v *string)     { wireField(c, v, (*wireReader).str, (*wireWriter).str) }

// wireField reads a field into v, or writes v, by the codec's direction.
func wireField[T any](c *wireCodec, v *T, read func(*wireReader) T, write func(*wireWriter, T)) {
	if c.decoding {
		*v = read(&c.r)
	} else {
		write(&c.w, *v)
	}
}

// flags packs up to 8 booleans into one byte; decoding, a bit beyond
// them is an error.
func (c *wireCodec) flags(fs ...*bool) {
	if !c.decoding {
		var b uint8
		for i, f := range fs {
			if *f {
				b |= 1 << i
			}
		}
		c.w.u8(b)
		return
	}
	got := c.r.flags(len(fs))
	for i, f := range fs {
		*f = got[i]
	}
}

// wireList carries a list: its length, then each item by item. Decoding,
// the length is bounded by max and by minItem bytes an item (wireReader's
// count) before the list is made.
func wireList[T any](c *wireCodec, list *[]T, max, minItem int, item func(*T, *wireCodec)) {
	if c.decoding {
		if n := c.r.count(max, minItem); n > 0 {
			*list = make([]T, n)
		}
	} else {
		c.w.uvarint(uint64(len(*list)))
	}
	for i := range *list {
		item(&(*list)[i], c)
	}
}

// wireWriter appends fields; the first error sticks.
type wireWriter struct {
	b   []byte
	err error
}

func (w *wireWriter) u8(v uint8)       { w.b = append(w.b, v) }
func (w *wireWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *wireWriter) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *wireWriter) f64(v float64)    { w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v)) }

func (w *wireWriter) str(s string) {
	if len(s) > MaxClusterString && w.err == nil {
		w.err = fmt.Errorf("a string of %d bytes, more than %d", len(s), MaxClusterString)
	}
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// wireReader reads fields; after the first error every read returns zero.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	r.b = nil
}

func (r *wireReader) u8() uint8 {
	if len(r.b) < 1 {
		r.fail("cut short")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *wireReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("cut short or a varint overflows")
		return 0
	}
	if n != uvarintLen(v) {
		r.fail("a varint not in its shortest form")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) varint() int64 {
	u := r.uvarint() // a varint is the zigzag of its value as a uvarint
	return int64(u>>1) ^ -int64(u&1)
}

func (r *wireReader) f64() float64 {
	if len(r.b) < 8 {
		r.fail("cut short")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// flags reads a byte of n flags; a bit beyond them is an error.
func (r *wireReader) flags(n int) [8]bool {
	var out [8]bool
	b := r.u8()
	if b>>n != 0 {
		r.fail("unknown flags %#x", b)
		return out
	}
	for i := range n {
		out[i] = b&(1<<i) != 0
	}
	return out
}

func (r *wireReader) str() string {
	n := r.uvarint()
	switch {
	case r.err != nil:
		return ""
	case n > MaxClusterString:
		r.fail("a string of %d bytes, more than %d", n, MaxClusterString)
		return ""
	case n > uint64(len(r.b)):
		r.fail("cut short")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a list's length: at most max, and at most what the bytes
// left can hold at minItem bytes an item, so a forged length cannot make
// the reader allocate more than the message's own size justifies.
func (r *wireReader) count(max, minItem int) int {
	n := r.uvarint()
	switch {
	case r.err != nil:
		return 0
	case n > uint64(max):
		r.fail("a list of %d items, more than %d", n, max)
		return 0
	case n*uint64(minItem) > uint64(len(r.b)):
		r.fail("cut short")
		return 0
	}
	return int(n)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
