package mockprovider

type outcome uint8

const (
	outcomeCompleted outcome = iota
	outcomeFailed
	outcomeCancelled
)

// request is the state of one model request from admission to its end. It
// lives on the handler's stack for non-stream answers and moves into the
// sseStream for streams, whose end comes after the handler returns.
type request struct {
	s      *Server
	m      *modelEntry
	ep     endpoint
	beh    *compiled
	stream bool
	fail   bool
	watch  connWatch
	r      render
	emb    *embeddingsRequest // the parsed embeddings request (endpointEmbeddings)

	rate    rateSnap
	hasRate bool

	slot     *slotPool // the pool whose slot is held, if any
	inflight bool
	ended    bool
	logIdx   int // request log ordinal (-1: not logged)
}

// enter marks the request as being served.
func (q *request) enter() {
	q.inflight = true
	q.m.c.enter()
	q.s.totals.enter()
	q.s.requests.started(q.logIdx)
}

// end records how the request finished, releases its slot and leaves the
// inflight gauge. Only the first call counts, which is what makes
// "cancelled" exact even when several signals report the same departure.
func (q *request) end(o outcome) {
	if q.ended {
		return
	}
	q.ended = true
	// Logged first: the slot released below may start the next request,
	// whose start must not precede this end in the log.
	q.s.requests.ended(q.logIdx, o)
	if q.inflight {
		q.m.c.leave()
		q.s.totals.leave()
	}
	if q.slot != nil {
		q.slot.release()
		q.slot = nil
	}
	var mc, tc = &q.m.c.completed, &q.s.totals.completed
	switch o {
	case outcomeFailed:
		mc, tc = &q.m.c.failed, &q.s.totals.failed
	case outcomeCancelled:
		mc, tc = &q.m.c.cancelled, &q.s.totals.cancelled
	}
	mc.Add(1)
	tc.Add(1)
}
