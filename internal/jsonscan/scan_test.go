package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestScanRequest(t *testing.T) {
	type want struct {
		model        string
		stream       bool
		includeUsage bool
		maxTokens    int64
		messages     int
		tools        int
	}
	cases := []struct {
		name string
		body string
		want want
	}{
		{"minimal", `{"model":"demo"}`, want{model: "demo", maxTokens: -1}},
		{"chat stream", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}`,
			want{model: "gpt-4o", stream: true, includeUsage: true, maxTokens: -1, messages: 2}},
		{"stream false", `{"stream":false,"model":"m"}`, want{model: "m", maxTokens: -1}},
		{"include_usage false", `{"model":"m","stream_options":{"include_usage":false}}`, want{model: "m", maxTokens: -1}},
		{"max tokens", `{"model":"m","max_tokens":1024}`, want{model: "m", maxTokens: 1024}},
		{"max completion tokens", `{"model":"m","max_completion_tokens":77}`, want{model: "m", maxTokens: 77}},
		{"responses string input", `{"model":"m","input":"hello","max_output_tokens":5}`, want{model: "m", maxTokens: 5, messages: 1}},
		{"responses array input", `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{}]}`, want{model: "m", maxTokens: -1, messages: 3}},
		{"tools and functions", `{"model":"m","tools":[{},{}],"functions":[{}]}`, want{model: "m", maxTokens: -1, tools: 3}},
		{"escaped model value", `{"model":"gpt\u002d4"}`, want{model: "gpt-4", maxTokens: -1}},
		{"whitespace everywhere", " \n{ \"model\" : \"m\" , \"stream\" : true } \n", want{model: "m", stream: true, maxTokens: -1}},
		{"nested model is not top level", `{"metadata":{"model":"x"},"model":"m"}`, want{model: "m", maxTokens: -1}},
		{"unicode text", `{"model":"m","messages":[{"content":"héllo 世界 \ud83d\ude00"}]}`, want{model: "m", maxTokens: -1, messages: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			if err := ScanRequest([]byte(tc.body), &r); err != nil {
				t.Fatalf("ScanRequest: %v", err)
			}
			got := want{string(r.Model), r.Stream, r.IncludeUsage, r.MaxTokens, r.Messages, r.Tools}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestScanRequestErrors(t *testing.T) {
	cases := []struct {
		name, body, wantSub string
	}{
		{"empty", ``, "empty body"},
		{"not object", `[1,2]`, "must be a JSON object"},
		{"string", `"x"`, "must be a JSON object"},
		{"trailing comma", `{"model":"m",}`, "expected a string key"},
		{"unterminated", `{"model":"m"`, "unexpected end"},
		{"trailing data", `{"model":"m"} x`, "unexpected data after"},
		{"bad literal", `{"model":"m","stream":tru}`, "invalid literal"},
		{"bad number", `{"model":"m","max_tokens":01}`, "expected ',' or '}'"},
		{"bad escape", `{"model":"m\x"}`, "invalid escape"},
		{"control char", "{\"model\":\"a\tb\"}", "control character"},
		{"duplicate model", `{"model":"cheap","model":"expensive"}`, `"model" appears more than once`},
		{"duplicate stream", `{"model":"m","stream":false,"stream":true}`, `"stream" appears more than once`},
		{"escaped key spelling", `{"mod\u0065l":"x","model":"m"}`, "escape sequences"},
		{"deep nesting", `{"model":"m","x":` + strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2) + `}`, "nested too deeply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			err := ScanRequest([]byte(tc.body), &r)
			if err == nil || !strings.Contains(err.Error(), tc.wantSub) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantSub)
			}
		})
	}
}

func TestNonStringModel(t *testing.T) {
	var r Request
	if err := ScanRequest([]byte(`{"model":42}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.ModelStart < 0 || r.ModelIsString {
		t.Fatalf("model span %d string %v; want a present, non-string model", r.ModelStart, r.ModelIsString)
	}
}

func TestAppendWithModel(t *testing.T) {
	body := []byte(`{"messages":[],"model" : "demo","stream":true}`)
	var r Request
	if err := ScanRequest(body, &r); err != nil {
		t.Fatal(err)
	}
	got := string(AppendWithModel(nil, body, &r, "gpt-4o-mini"))
	want := `{"messages":[],"model" : "gpt-4o-mini","stream":true}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestHasTopLevelKey(t *testing.T) {
	f := func(body, key string, want bool) {
		t.Helper()
		if got := HasTopLevelKey([]byte(body), key); got != want {
			t.Fatalf("HasTopLevelKey(%s, %q) = %v; want %v", body, key, got, want)
		}
	}
	f(`{"error":{"message":"x"}}`, "error", true)
	f(`{"choices":[{"delta":{"content":"the word \"error\""}}]}`, "error", false)
	f(`{"a":{"error":1}}`, "error", false)
	f(`{"error":1`, "error", false)
	f(`[{"error":1}]`, "error", false)
}

func TestScanAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hello there, how are you?"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	var r Request
	allocs := testing.AllocsPerRun(100, func() {
		if err := ScanRequest(body, &r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ScanRequest allocated %.1f times per run; want 0", allocs)
	}
}

// FuzzScanRequest checks the scanner against encoding/json: both must agree
// on validity, and for valid objects without duplicate routed keys the
// extracted model and stream flag must match a full decode.
func FuzzScanRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"demo"}`, `{"model":"m","stream":true,"messages":[{"content":"x"}]}`,
		`{"model":"gpt\u002d4","input":"x"}`, `[]`, `{"a":[1,2,{"b":null}],"model":"x"}`,
		`{"model":"m","max_tokens":1e3}`, `{"model":-0.5e-3}`, `{"x":"\ud83d\ude00"}`, `{`, `{"model":"m",}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Request
		err := ScanRequest(body, &r)
		valid := json.Valid(body)
		var dup *DuplicateFieldError
		if err == nil && !valid {
			t.Fatalf("scanner accepted invalid JSON %q", body)
		}
		if err != nil {
			if errors.As(err, &dup) || strings.Contains(err.Error(), "escape sequences") || strings.Contains(err.Error(), "nested too deeply") {
				return
			}
			var se *SyntaxError
			if valid && !errors.Is(err, ErrNotObject) && errors.As(err, &se) {
				t.Fatalf("scanner rejected valid JSON %q: %v", body, err)
			}
			return
		}
		var m map[string]json.RawMessage
		if jerr := json.Unmarshal(body, &m); jerr != nil {
			return // valid JSON with invalid UTF-8 strings etc.
		}
		if raw, ok := m["model"]; ok && r.ModelIsString {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != string(r.Model) && !strings.ContainsRune(s, '\uFFFD') {
				t.Fatalf("model %q, encoding/json says %q", r.Model, s)
			}
		}
		if raw, ok := m["stream"]; ok {
			if (string(raw) == "true") != r.Stream {
				t.Fatalf("stream %v, raw %s", r.Stream, raw)
			}
		}
		// An accepted body's token limit is the largest the provider could
		// read, within the bound the ledger's arithmetic needs.
		want := int64(-1)
		for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
			var n *int64
			if raw, ok := m[k]; ok && json.Unmarshal(raw, &n) == nil && n != nil {
				want = max(want, *n)
			}
		}
		if r.MaxTokens != want || r.MaxTokens > MaxTokensLimit {
			t.Fatalf("max tokens %d, encoding/json says %d (%s)", r.MaxTokens, want, body)
		}
	})
}

// TestTokenLimitsCannotBeSmuggled is finding 7: the gateway read the
// first max_tokens and the provider the last, and 2^63-1 overflowed the
// ledger's estimate to a reservation of 0; both let streams through a
// token budget. Each limit field is now read once, as a bounded whole
// number, and the largest of them counts.
func TestTokenLimitsCannotBeSmuggled(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64  // MaxTokens when accepted
		err  string // error substring when refused
	}{
		{`{"model":"m","max_tokens":10,"max_tokens":100000}`, 0, `"max_tokens" appears more than once`},
		{`{"model":"m","max_completion_tokens":1,"max_completion_tokens":9}`, 0, `"max_completion_tokens" appears more than once`},
		{`{"model":"m","max_output_tokens":1,"max_output_tokens":9}`, 0, `"max_output_tokens" appears more than once`},
		{`{"model":"m","n":1,"n":100}`, 0, `"n" appears more than once`},
		{`{"model":"m","max_tokens":9223372036854775807}`, 0, `"max_tokens" must be a whole number from 0 to 16777216`},
		{`{"model":"m","max_tokens":99999999999999999999}`, 0, `must be a whole number`},
		{`{"model":"m","max_tokens":-1}`, 0, `must be a whole number`},
		{`{"model":"m","max_tokens":1e9}`, 0, `must be a whole number`},
		{`{"model":"m","max_tokens":100.5}`, 0, `must be a whole number`},
		{`{"model":"m","max_tokens":"100"}`, 0, `must be a whole number`},
		{`{"model":"m","n":1000}`, 0, `"n" must be a whole number from 0 to 128`},
		{`{"model":"m","max_t\u006fkens":5}`, 0, "escape sequences"},
		{`{"model":"m","max_tokens":16777216}`, 16777216, ""},
		{`{"model":"m","max_tokens":null}`, -1, ""},
		{`{"model":"m","max_tokens":10,"max_completion_tokens":900}`, 900, ""},
		{`{"model":"m","max_completion_tokens":900,"max_tokens":10}`, 900, ""},
	} {
		var r Request
		err := ScanRequest([]byte(tc.body), &r)
		switch {
		case tc.err == "" && (err != nil || r.MaxTokens != tc.want):
			t.Errorf("%s: %v, max tokens %d; want %d", tc.body, err, r.MaxTokens, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v; want an error with %q", tc.body, err, tc.err)
		}
	}
}

// TestScanFindsTheConversation: the fields that identify a conversation
// are found where each dialect puts them.
func TestScanFindsTheConversation(t *testing.T) {
	var r Request
	body := []byte(`{"model":"m","system":[{"type":"text","text":"s"}],"metadata":{"user_id":"u1"},"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`)
	if err := ScanRequest(body, &r); err != nil {
		t.Fatal(err)
	}
	if string(body[r.SystemStart:r.SystemEnd]) != `[{"type":"text","text":"s"}]` || string(body[r.MetadataStart:r.MetadataEnd]) != `{"user_id":"u1"}` ||
		string(body[r.OpeningStart:r.OpeningEnd]) != `[{"role":"user","content":"a"},{"role":"assistant","content":"b"}` || r.PromptCacheKey != nil {
		t.Fatalf("messages: system %d-%d metadata %d-%d opening %q", r.SystemStart, r.SystemEnd, r.MetadataStart, r.MetadataEnd, body[r.OpeningStart:r.OpeningEnd])
	}
	body = []byte(`{"model":"m","instructions":"be brief","prompt_cache_key":"conv-1","input":[{"role":"user","content":"a"}]}`)
	if err := ScanRequest(body, &r); err != nil {
		t.Fatal(err)
	}
	if string(r.PromptCacheKey) != "conv-1" || string(body[r.SystemStart:r.SystemEnd]) != `"be brief"` ||
		string(body[r.OpeningStart:r.OpeningEnd]) != `[{"role":"user","content":"a"}` || r.MetadataStart != -1 {
		t.Fatalf("responses: %+v", r)
	}
	body = []byte(`{"model":"m","input":"hello"}`)
	if err := ScanRequest(body, &r); err != nil || string(body[r.OpeningStart:r.OpeningEnd]) != `"hello"` {
		t.Fatalf("string input: %v", err)
	}
}
