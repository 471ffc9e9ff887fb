// Package sse frames a server-sent-events byte stream into events without
// copying in the common case, so the gateway can relay each upstream event as
// exactly one downstream write and look at its name and data on the way.
//
// It follows the WHATWG event-stream grammar: lines end in CRLF, LF or CR; a
// blank line ends an event; "field: value" drops one space after the colon;
// lines starting with ':' are comments. Blocks without data (comment-only
// keep-alives, a lone "event:" line) are not events and are skipped, which
// is also what keeps keep-alive comments from counting as progress.
package sse

import (
	"bytes"
	"errors"
	"io"
)

// ErrEventTooLarge is returned when one event exceeds the reader's limit.
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

// Event is one dispatched event. Its slices stay valid until the next call
// to Next.
type Event struct {
	// Raw is the event's bytes as received (fields and the terminating blank
	// line), with comment lines removed. Relaying Raw forwards the event
	// unchanged.
	Raw []byte
	// Name is the value of the event field, or nil.
	Name []byte
	// Data is the data field values joined by '\n'.
	Data []byte
	// ID is the value of the id field, or nil.
	ID []byte
	// Comments counts comment lines seen in this block.
	Comments int
}

// Reader reads events from an underlying stream.
type Reader struct {
	r          io.Reader
	buf        []byte
	start, end int
	max        int
	err        error
	scanned    int // bytes after start already searched for a block end
	ev         Event
	scratch    []byte // Data joined from several lines
	rawScratch []byte // Raw with comment lines removed
	// SkippedComments counts comment-only blocks skipped so far.
	SkippedComments int
}

// NewReader returns a Reader over r using buf as its initial buffer (it
// grows up to max bytes per event; max <= 0 means 16 MiB).
func NewReader(r io.Reader, buf []byte, max int) *Reader {
	if max <= 0 {
		max = 16 << 20
	}
	if cap(buf) < 512 {
		buf = make([]byte, 4096)
	}
	return &Reader{r: r, buf: buf[:cap(buf)], max: max}
}

// Reset reuses the reader for a new stream, keeping its buffers. The zero
// Reader is usable after Reset.
func (r *Reader) Reset(src io.Reader) {
	buf, max := r.buf, r.max
	if len(buf) == 0 {
		buf = make([]byte, 4096)
	}
	if max <= 0 {
		max = 16 << 20
	}
	*r = Reader{r: src, buf: buf, max: max, scratch: r.scratch[:0], rawScratch: r.rawScratch[:0]}
}

// Buffer returns the reader's buffer so a caller can pool it.
func (r *Reader) Buffer() []byte { return r.buf }

// Next returns the next event. At a clean end of stream it returns io.EOF;
// when the stream ends inside a line it returns io.ErrUnexpectedEOF. An
// event whose lines are complete but that lacks the final blank line at end
// of stream is still dispatched (servers commonly end with "data: [DONE]\n").
func (r *Reader) Next() (*Event, error) {
	for {
		if r.err == nil && !r.blockReady() {
			if err := r.fill(); err != nil {
				return nil, err
			}
			continue
		}
		ev, n, ok := r.parse(r.err != nil)
		if ok {
			r.start += n
			r.scanned = 0
			if ev != nil {
				return ev, nil
			}
			continue // a block without data: skip
		}
		if r.err != nil {
			if r.start < r.end && !allBlank(r.buf[r.start:r.end]) {
				r.start = r.end
				if r.err == io.EOF {
					return nil, io.ErrUnexpectedEOF
				}
			}
			return nil, r.err
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// blockReady reports whether the unread bytes hold a blank line, i.e. a
// complete block. Only bytes not searched before are examined, so a large
// event arriving in small reads costs linear, not quadratic, time.
// ReadAll reads every event of a whole stream, each copied (Next's are
// views into the reader's buffer), with no bound on an event's size: for a
// stream already in memory, such as a test's.
func ReadAll(src io.Reader) ([]Event, error) {
	r := NewReader(src, nil, 0)
	var out []Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, Event{Name: bytes.Clone(ev.Name), Data: bytes.Clone(ev.Data)})
	}
}

func (r *Reader) blockReady() bool {
	b := r.buf[r.start:r.end]
	if len(b) > 0 && (b[0] == '\n' || b[0] == '\r') {
		return true
	}
	i := r.scanned - 1
	if i < 0 {
		i = 0
	}
	for ; i+1 < len(b); i++ {
		c := b[i]
		if c != '\n' && c != '\r' {
			continue
		}
		if d := b[i+1]; (d == '\n' || d == '\r') && !(c == '\r' && d == '\n') {
			return true
		}
	}
	r.scanned = len(b)
	return false
}

func allBlank(b []byte) bool {
	for _, c := range b {
		if c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// fill reads more bytes, compacting or growing the buffer.
func (r *Reader) fill() error {
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		if len(r.buf) >= r.max {
			return ErrEventTooLarge
		}
		size := 2 * len(r.buf)
		if size > r.max {
			size = r.max
		}
		nb := make([]byte, size)
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	n, err := r.r.Read(r.buf[r.end:])
	r.end += n
	if err != nil {
		r.err = err
	}
	return nil
}

// parse tries to cut one block from the unread bytes. ok is false when more
// input is needed. ev is nil for a block that dispatches nothing.
func (r *Reader) parse(atEOF bool) (ev *Event, n int, ok bool) {
	b := r.buf[r.start:r.end]
	ev = &r.ev
	*ev = Event{}
	dataLines := 0
	var dataFirst []byte
	r.scratch = r.scratch[:0]
	commentSpans := 0
	pos := 0
	for {
		// Find the end of the line starting at pos.
		rel := bytes.IndexAny(b[pos:], "\r\n")
		if rel < 0 {
			if atEOF && pos < len(b) {
				return nil, 0, false // incomplete last line
			}
			if atEOF && dataLines > 0 {
				return r.finish(ev, b[:pos], dataLines, dataFirst, commentSpans), pos, true
			}
			if atEOF && pos > 0 {
				return nil, pos, true // complete lines that dispatch nothing
			}
			return nil, 0, false
		}
		lineEnd := pos + rel
		next := lineEnd + 1
		if b[lineEnd] == '\r' {
			if next >= len(b) {
				if !atEOF {
					return nil, 0, false // need to see whether '\n' follows
				}
			} else if b[next] == '\n' {
				next++
			}
		}
		line := b[pos:lineEnd]
		if len(line) == 0 {
			// Blank line: end of block.
			if dataLines == 0 {
				if ev.Comments > 0 {
					r.SkippedComments++
				}
				return nil, next, true
			}
			return r.finish(ev, b[:next], dataLines, dataFirst, commentSpans), next, true
		}
		if line[0] == ':' {
			ev.Comments++
			commentSpans++
			pos = next
			continue
		}
		name, value := line, line[:0]
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "data":
			if dataLines == 0 {
				dataFirst = value
			} else {
				if dataLines == 1 {
					r.scratch = append(r.scratch[:0], dataFirst...)
				}
				r.scratch = append(r.scratch, '\n')
				r.scratch = append(r.scratch, value...)
			}
			dataLines++
		case "event":
			ev.Name = value
		case "id":
			ev.ID = value
		}
		pos = next
	}
}

func (r *Reader) finish(ev *Event, block []byte, dataLines int, dataFirst []byte, comments int) *Event {
	if dataLines == 1 {
		ev.Data = dataFirst
	} else {
		ev.Data = r.scratch
	}
	if comments == 0 {
		ev.Raw = block
		return ev
	}
	// Rebuild the block without its comment lines.
	r.rawScratch = r.rawScratch[:0]
	pos := 0
	for pos < len(block) {
		rel := bytes.IndexAny(block[pos:], "\r\n")
		end := len(block)
		if rel >= 0 {
			end = pos + rel + 1
			if block[pos+rel] == '\r' && end < len(block) && block[end] == '\n' {
				end++
			}
		}
		if block[pos] != ':' {
			r.rawScratch = append(r.rawScratch, block[pos:end]...)
		}
		pos = end
	}
	ev.Raw = r.rawScratch
	return ev
}
