package mockprovider

// render holds the per-request values that are spliced into the byte
// templates of every endpoint.
type render struct {
	n            uint64 // request sequence number, used in ids
	created      int64  // unix seconds
	modelRaw     []byte // request's model as a JSON string literal
	p, c         int    // prompt and completion tokens
	beh          *compiled
	includeUsage bool
	tool         *toolCall // answer with this tool call (tools.go)
}

// streamPlan is a fully rendered stream: frames are written one per HTTP
// chunk. Content deltas occupy frames[contentStart : contentStart+contentCount];
// the frames before them are the content-free opening, the ones after are the
// closing events. Fault injection cuts the plan at a content position.
type streamPlan struct {
	frames       [][]byte
	contentStart int
	contentCount int
	// errFrame renders the in-band error event for error_event mode, given
	// the number of frames already sent (Responses events carry it as their
	// sequence number).
	errFrame func(sent int) []byte
}

// planBuilder accumulates frames in one buffer and slices it at the end, so a
// stream costs a couple of allocations however many events it has.
type planBuilder struct {
	buf  []byte
	ends []int
}

func (b *planBuilder) end() { b.ends = append(b.ends, len(b.buf)) }

func (b *planBuilder) frames() [][]byte {
	out := make([][]byte, len(b.ends))
	start := 0
	for i, e := range b.ends {
		out[i] = b.buf[start:e:e]
		start = e
	}
	return out
}

// sseEvent opens an "event: name\ndata: " frame.
func (b *planBuilder) sseEvent(name string) {
	b.buf = append(b.buf, "event: "...)
	b.buf = append(b.buf, name...)
	b.buf = append(b.buf, "\ndata: "...)
}

// closeFrame ends the data line and the frame.
func (b *planBuilder) closeFrame() {
	b.buf = append(b.buf, "\n\n"...)
	b.end()
}

// cached is how many prompt tokens the answer reports as cached
// (Behavior.CachedTokens, at most the prompt).
func (r *render) cached() int {
	if r.beh == nil {
		return 0
	}
	return min(r.beh.b.CachedTokens, r.p)
}
