package messages

// IngestOutcome is how an ingest admission ended.
type IngestOutcome uint8

// Outcomes. The Shed* outcomes are load shedding and are counted as such;
// IngestCanceled (the caller left while queued) and IngestStopped (the
// gateway is shutting down) are not sheds.
const (
	IngestAdmitted IngestOutcome = iota
	ShedQueueTimeout
	ShedQueuedBytesBudget
	ShedBodyExceedsBudget
	ShedInflightBytesBudget
	ShedResourcePressure
	IngestCanceled
	IngestStopped
	NumIngestOutcomes
)

var ingestOutcomeNames = [...]string{"admitted", "queue_timeout", "queued_bytes_budget", "body_exceeds_budget",
	"inflight_bytes_budget", "resource_pressure", "canceled", "stopped"}

// String returns the reason code (the shed reasons are OmniRoute's).
func (o IngestOutcome) String() string {
	if int(o) < len(ingestOutcomeNames) {
		return ingestOutcomeNames[o]
	}
	return "unknown"
}

// IsShed reports whether the outcome is load shedding.
func (o IngestOutcome) IsShed() bool { return o >= ShedQueueTimeout && o <= ShedResourcePressure }

// AcquireBytes asks the ingest actor for a byte reservation (and, with
// Count, a heavy-request slot) after the lock-free fast path could not
// grant it. The actor queues it fairly by Key and answers exactly once on
// Reply (capacity 1). The sender owns the message again once the answer
// arrived; it pools and reuses it, so the actor keeps no reference after
// answering.
type AcquireBytes struct {
	// Key is the caller's fairness key (an opaque tenant id). It orders
	// waiters; it never adds capacity.
	Key   [20]byte
	Bytes int64
	Count bool
	Reply chan IngestOutcome
}

// CancelAcquire withdraws a queued AcquireBytes whose caller left. The
// actor answers the AcquireBytes with IngestCanceled, unless it already
// answered it.
type CancelAcquire struct{ Request *AcquireBytes }
