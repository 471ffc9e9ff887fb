package lanes

import (
	"strings"
	"testing"
)

// TestReasonTableComplete: every reason has its code, status and message,
// codes are unique, and Rejections lists every refusal and nothing else.
func TestReasonTableComplete(t *testing.T) {
	codes := map[string]Reason{}
	for r := None + 1; r < NumReasons; r++ {
		if r.Code() == "" || r.Status() < 400 || r.Message() == "" || !strings.HasPrefix(r.Code(), "admission_") {
			t.Errorf("reason %d incomplete: code %q status %d message %q", r, r.Code(), r.Status(), r.Message())
		}
		if o, dup := codes[r.Code()]; dup {
			t.Errorf("reasons %d and %d share code %q", o, r, r.Code())
		}
		codes[r.Code()] = r
	}
	if got := len(Rejections()); got != int(NumReasons)-3 {
		t.Errorf("Rejections lists %d reasons, want every reason but None, Busy and Aborted (%d)", got, NumReasons-3)
	}
	for _, r := range []Reason{None, Busy, Aborted} {
		if r.Rejection() {
			t.Errorf("%q counts as a rejection", r.Code())
		}
	}
}
