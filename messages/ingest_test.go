package messages

import "testing"

// TestIngestOutcomeTable: every ingest outcome has a reason code, unique;
// the sheds are exactly the outcomes ShedOutcomes lists, and the ones the
// gateway counts as load shedding.
func TestIngestOutcomeTable(t *testing.T) {
	seen := map[string]IngestOutcome{}
	for o := IngestOutcome(0); o < NumIngestOutcomes; o++ {
		n := o.String()
		if n == "" || n == "unknown" {
			t.Errorf("outcome %d has no reason code", o)
		}
		if p, dup := seen[n]; dup {
			t.Errorf("outcomes %d and %d are both %q", p, o, n)
		}
		seen[n] = o
	}
	if NumIngestOutcomes.String() != "unknown" || NumIngestOutcomes.IsShed() {
		t.Errorf("an outcome past the table is known")
	}
	want := []IngestOutcome{ShedQueueTimeout, ShedQueuedBytesBudget, ShedBodyExceedsBudget, ShedInflightBytesBudget, ShedResourcePressure}
	got := ShedOutcomes()
	if len(got) != len(want) {
		t.Fatalf("sheds %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] || !got[i].IsShed() {
			t.Errorf("sheds %v, want %v", got, want)
		}
	}
	for _, o := range []IngestOutcome{IngestAdmitted, IngestCanceled, IngestStopped, RefusedMessageLimit, BusyStructureLimit} {
		if o.IsShed() {
			t.Errorf("%s counts as a shed", o)
		}
	}
}
