package apierror

import (
	"encoding/json"
	"testing"
)

func TestAppendFormats(t *testing.T) {
	e := &Error{Status: 429, Code: "rate_limited", Message: "slow \"down\" <now>\n"}
	var oa struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(e.Append(nil, OpenAI, "req_1"), &oa); err != nil {
		t.Fatal(err)
	}
	if oa.Error.Message != e.Message || oa.Error.Type != "rate_limit_error" || oa.Error.Code != "rate_limited" {
		t.Fatalf("openai: %+v", oa)
	}
	var an struct {
		Type  string
		Error struct{ Type, Message, Code string }
		ReqID string `json:"request_id"`
	}
	if err := json.Unmarshal(e.Append(nil, Anthropic, "req_1"), &an); err != nil {
		t.Fatal(err)
	}
	if an.Type != "error" || an.Error.Type != "rate_limit_error" || an.Error.Message != e.Message || an.ReqID != "req_1" {
		t.Fatalf("anthropic: %+v", an)
	}
}

// TestStatusTypes: the error type each dialect gives a status, the
// statuses of the table and, past it, of each class.
func TestStatusTypes(t *testing.T) {
	for _, c := range []struct {
		status            int
		openAI, anthropic string
	}{
		{400, "invalid_request_error", "invalid_request_error"},
		{401, "authentication_error", "authentication_error"},
		{402, "invalid_request_error", "billing_error"},
		{403, "permission_error", "permission_error"},
		{404, "not_found_error", "not_found_error"},
		{413, "invalid_request_error", "request_too_large"},
		{422, "invalid_request_error", "invalid_request_error"},
		{429, "rate_limit_error", "rate_limit_error"},
		{500, "server_error", "api_error"},
		{502, "server_error", "api_error"},
		{503, "server_error", "overloaded_error"},
		{504, "server_error", "timeout_error"},
		{529, "server_error", "overloaded_error"},
	} {
		if got := (&Error{Status: c.status}).anthropicType(); got != c.anthropic {
			t.Errorf("status %d, Anthropic: %s, want %s", c.status, got, c.anthropic)
		}
		var oa struct{ Error struct{ Type string } }
		if err := json.Unmarshal((&Error{Status: c.status}).Append(nil, OpenAI, ""), &oa); err != nil || oa.Error.Type != c.openAI {
			t.Errorf("status %d, OpenAI: %s (%v), want %s", c.status, oa.Error.Type, err, c.openAI)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("plain")
	f.Add("quote\" backslash\\ \x00 \u2028 \xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s is not valid JSON: %v", s, out, err)
		}
		var want string
		b, _ := json.Marshal(s)
		_ = json.Unmarshal(b, &want)
		if back != want {
			t.Fatalf("round trip %q -> %q, encoding/json gives %q", s, back, want)
		}
	})
}
