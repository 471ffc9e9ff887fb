package ingest

import "github.com/omniroute/gateway/messages"

// The ingest actor's messages are private: only its handle sends them
// (Handle.queue, from the request path's Acquire); what crosses to the
// transport is the answer, a messages.IngestOutcome.

// acquireBytes asks the ingest actor for a byte reservation (and, with
// Count, a heavy-request slot) after the lock-free fast path could not
// grant it. The actor queues it fairly by Key and answers exactly once on
// Reply (capacity 1). The sender owns the message again once the answer
// arrived; it pools and reuses it, so the actor keeps no reference after
// answering.
type acquireBytes struct {
	// Key is the caller's fairness key (an opaque tenant id). It orders
	// waiters; it never adds capacity.
	Key   [20]byte
	Bytes int64
	Count bool
	Reply chan messages.IngestOutcome
}

// cancelAcquire withdraws a queued acquireBytes whose caller left. The
// actor answers the acquireBytes with IngestCanceled, unless it already
// answered it.
type cancelAcquire struct{ Request *acquireBytes }
