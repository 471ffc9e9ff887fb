package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct {
	name, data, raw string
}

func collect(t *testing.T, r io.Reader, bufSize int) ([]ev, error) {
	t.Helper()
	rd := NewReader(r, make([]byte, bufSize), 1<<20)
	var out []ev
	for {
		e, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev{string(e.Name), string(e.Data), string(e.Raw)})
	}
}

func TestReader(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		want  []ev
		error error
	}{
		{"chat", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []ev{{"", `{"a":1}`, "data: {\"a\":1}\n\n"}, {"", "[DONE]", "data: [DONE]\n\n"}}, nil},
		{"named", "event: message_start\ndata: {}\n\n", []ev{{"message_start", "{}", "event: message_start\ndata: {}\n\n"}}, nil},
		{"crlf", "event: x\r\ndata: 1\r\n\r\n", []ev{{"x", "1", "event: x\r\ndata: 1\r\n\r\n"}}, nil},
		{"cr only", "data: 1\r\rdata: 2\r\r", []ev{{"", "1", "data: 1\r\r"}, {"", "2", "data: 2\r\r"}}, nil},
		{"multi-line data", "data: a\ndata: b\n\n", []ev{{"", "a\nb", "data: a\ndata: b\n\n"}}, nil},
		{"no space after colon", "data:x\n\n", []ev{{"", "x", "data:x\n\n"}}, nil},
		{"comment-only block skipped", ": keep-alive\n\ndata: 1\n\n", []ev{{"", "1", "data: 1\n\n"}}, nil},
		{"comment inside event removed from raw", ": OPENROUTER PROCESSING\ndata: 1\n\n", []ev{{"", "1", "data: 1\n\n"}}, nil},
		{"event without data skipped", "event: ping\n\ndata: 2\n\n", []ev{{"", "2", "data: 2\n\n"}}, nil},
		{"last event without blank line", "data: [DONE]\n", []ev{{"", "[DONE]", "data: [DONE]\n"}}, nil},
		{"truncated line", "data: 1\n\ndata: {\"par", []ev{{"", "1", "data: 1\n\n"}}, io.ErrUnexpectedEOF},
		{"leading blank lines", "\n\n\ndata: 1\n\n", []ev{{"", "1", "data: 1\n\n"}}, nil},
		{"empty", "", nil, nil},
	}
	for _, tc := range cases {
		for _, size := range []int{512, 4096} {
			for _, mode := range []string{"whole", "onebyte"} {
				t.Run(tc.name+"/"+mode, func(t *testing.T) {
					var r io.Reader = strings.NewReader(tc.in)
					if mode == "onebyte" {
						r = iotest.OneByteReader(r)
					}
					got, err := collect(t, r, size)
					if !errors.Is(err, tc.error) && !(err == nil && tc.error == nil) {
						t.Fatalf("err = %v, want %v", err, tc.error)
					}
					if len(got) != len(tc.want) {
						t.Fatalf("got %d events %q, want %d %q", len(got), got, len(tc.want), tc.want)
					}
					for i := range got {
						if got[i] != tc.want[i] {
							t.Fatalf("event %d = %+v, want %+v", i, got[i], tc.want[i])
						}
					}
				})
			}
		}
	}
}

func TestEventTooLarge(t *testing.T) {
	in := "data: " + strings.Repeat("x", 10000) + "\n\n"
	rd := NewReader(strings.NewReader(in), make([]byte, 512), 4096)
	if _, err := rd.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
}

func TestBufferGrowsForLargeEvents(t *testing.T) {
	big := strings.Repeat("y", 100000)
	in := "data: " + big + "\n\ndata: small\n\n"
	got, err := collect(t, iotest.HalfReader(strings.NewReader(in)), 512)
	if err != nil || len(got) != 2 || got[0].data != big || got[1].data != "small" {
		t.Fatalf("err %v, %d events", err, len(got))
	}
}

func TestNextAllocatesNothing(t *testing.T) {
	stream := bytes.Repeat([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n"), 200)
	br := bytes.NewReader(stream)
	rd := NewReader(br, make([]byte, 8192), 0)
	allocs := testing.AllocsPerRun(20, func() {
		br.Reset(stream)
		rd.Reset(br)
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("reading 200 events allocated %.1f times; want 0", allocs)
	}
}

// reference is a slow, literal implementation of the WHATWG dispatch rules
// (with this package's end-of-stream leniency) used as the fuzz oracle.
func reference(in []byte) (events []ev, truncated bool) {
	var lines []string
	var terms []bool // line had a terminator
	s := string(in)
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			lines, terms = append(lines, s), append(terms, false)
			break
		}
		lines, terms = append(lines, s[:i]), append(terms, true)
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			s = s[i+2:]
		} else {
			s = s[i+1:]
		}
	}
	var name string
	var data []string
	hasData := false
	for i, l := range lines {
		if !terms[i] {
			return events, true
		}
		if l == "" {
			if hasData {
				events = append(events, ev{name: name, data: strings.Join(data, "\n")})
			}
			name, data, hasData = "", nil, false
			continue
		}
		if l[0] == ':' {
			continue
		}
		f, v := l, ""
		if j := strings.IndexByte(l, ':'); j >= 0 {
			f, v = l[:j], strings.TrimPrefix(l[j+1:], " ")
		}
		switch f {
		case "data":
			data = append(data, v)
			hasData = true
		case "event":
			name = v
		}
	}
	if hasData {
		events = append(events, ev{name: name, data: strings.Join(data, "\n")})
	}
	return events, false
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: 1\n\n", "event: a\ndata: b\n\n", ": c\n\ndata: x\r\n\r\n", "data: a\ndata: b\n\n",
		"data:1\rdata:2\r\r", "data", "data: [DONE]\n", "\n\n", "event: e\n\nid: 3\ndata: q\n\n",
	} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		want, truncated := reference(in)
		var r io.Reader = bytes.NewReader(in)
		if chunk%3 == 1 {
			r = iotest.OneByteReader(r)
		} else if chunk%3 == 2 {
			r = iotest.HalfReader(r)
		}
		rd := NewReader(r, make([]byte, 512), 1<<20)
		var got []ev
		var err error
		for {
			var e *Event
			e, err = rd.Next()
			if err != nil {
				break
			}
			got = append(got, ev{name: string(e.Name), data: string(e.Data)})
			// Raw must re-parse to the same event.
			again, _ := reference(e.Raw)
			if len(again) != 1 || again[0].data != string(e.Data) || again[0].name != string(e.Name) {
				t.Fatalf("raw %q does not re-parse to the event (%q)", e.Raw, again)
			}
		}
		if truncated != (err == io.ErrUnexpectedEOF) {
			t.Fatalf("input %q: truncated=%v but err=%v", in, truncated, err)
		}
		if !truncated && err != io.EOF {
			t.Fatalf("input %q: err %v", in, err)
		}
		if len(got) != len(want) {
			t.Fatalf("input %q: got %q, want %q", in, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("input %q: event %d got %q want %q", in, i, got[i], want[i])
			}
		}
	})
}

// TestReadAll: every event of a stream, copied (the reader's buffer is
// reused, so views would change under the caller), and a broken stream's
// error with the events before it.
func TestReadAll(t *testing.T) {
	evs, err := ReadAll(iotest.OneByteReader(strings.NewReader("event: a\ndata: 1\n\ndata: 2\n\n")))
	if err != nil || len(evs) != 2 || string(evs[0].Name) != "a" || string(evs[0].Data) != "1" || string(evs[1].Data) != "2" {
		t.Fatalf("ReadAll = %d events (%v), %v", len(evs), evs, err)
	}
	boom := errors.New("boom")
	evs, err = ReadAll(io.MultiReader(strings.NewReader("data: 1\n\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || len(evs) != 1 || string(evs[0].Data) != "1" {
		t.Fatalf("ReadAll of a broken stream = %d events (%v), %v", len(evs), evs, err)
	}
}
