package messages

// IngestOutcome is how an ingest admission ended, or why the ingest stage
// refused a request: the ingest family of rejection reasons.
type IngestOutcome uint8

// Outcomes. The Shed* outcomes are load shedding and are counted as such;
// IngestCanceled (the caller left while queued) and IngestStopped (the
// gateway is shutting down) are not sheds. RefusedMessageLimit and
// BusyStructureLimit are the structural stage's refusals (too many
// messages; no room for a structurally heavy body): they are never an
// answer of the ingest actor, only the reason of the caller's error.
const (
	IngestAdmitted IngestOutcome = iota
	ShedQueueTimeout
	ShedQueuedBytesBudget
	ShedBodyExceedsBudget
	ShedInflightBytesBudget
	ShedResourcePressure
	IngestCanceled
	IngestStopped
	RefusedMessageLimit
	BusyStructureLimit
	NumIngestOutcomes
)

// ingestOutcomes is the one table of the family: every outcome's reason
// code (the error's "reason", the X-Omniroute-Admission-Reason header and
// the sheds metric's label) and whether it is a shed
// (TestIngestOutcomeTable).
var ingestOutcomes = [NumIngestOutcomes]struct {
	name string
	shed bool
}{
	IngestAdmitted:          {"admitted", false},
	ShedQueueTimeout:        {"queue_timeout", true},
	ShedQueuedBytesBudget:   {"queued_bytes_budget", true},
	ShedBodyExceedsBudget:   {"body_exceeds_budget", true},
	ShedInflightBytesBudget: {"inflight_bytes_budget", true},
	ShedResourcePressure:    {"resource_pressure", true},
	IngestCanceled:          {"canceled", false},
	IngestStopped:           {"stopped", false},
	RefusedMessageLimit:     {"message_limit", false},
	BusyStructureLimit:      {"structure_limit", false},
}

// String returns the reason code (the shed reasons are OmniRoute's).
func (o IngestOutcome) String() string {
	if o < NumIngestOutcomes {
		return ingestOutcomes[o].name
	}
	return "unknown"
}

// IsShed reports whether the outcome is load shedding.
func (o IngestOutcome) IsShed() bool { return o < NumIngestOutcomes && ingestOutcomes[o].shed }

// ShedOutcomes lists the shed outcomes in table order (the report and
// metrics order).
func ShedOutcomes() []IngestOutcome {
	var out []IngestOutcome
	for o := IngestOutcome(0); o < NumIngestOutcomes; o++ {
		if ingestOutcomes[o].shed {
			out = append(out, o)
		}
	}
	return out
}
