package apierror

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReasonRenderedInBothDialects(t *testing.T) {
	e := &Error{Status: 503, Type: "server_error", Code: "chat_admission_busy", Reason: "queue_timeout", Message: "busy"}
	for _, f := range []Format{OpenAI, Anthropic} {
		var v struct {
			Error struct{ Code, Reason string }
		}
		b := e.Append(nil, f, "r")
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if v.Error.Code != "chat_admission_busy" || v.Error.Reason != "queue_timeout" {
			t.Fatalf("format %d: %s", f, b)
		}
	}
	if b := (&Error{Status: 400, Code: "x", Message: "m"}).Append(nil, OpenAI, ""); strings.Contains(string(b), "reason") {
		t.Fatalf("no reason field when unset: %s", b)
	}
}
