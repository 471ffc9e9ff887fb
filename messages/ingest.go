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
