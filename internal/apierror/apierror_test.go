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

func TestAnthropicTypes(t *testing.T) {
	f := func(status int, want string) {
		t.Helper()
		if got := (&Error{Status: status}).anthropicType(); got != want {
			t.Fatalf("status %d: %s, want %s", status, got, want)
		}
	}
	f(400, "invalid_request_error")
	f(401, "authentication_error")
	f(403, "permission_error")
	f(404, "not_found_error")
	f(413, "request_too_large")
	f(429, "rate_limit_error")
	f(500, "api_error")
	f(503, "overloaded_error")
	f(529, "overloaded_error")
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
