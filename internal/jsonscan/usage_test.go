package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestAppendIncludeUsage(t *testing.T) {
	cases := []struct {
		body, model, want string
	}{
		{`{"model":"a","stream":true,"messages":[]}`, "", `{"stream_options":{"include_usage":true},"model":"a","stream":true,"messages":[]}`},
		{` {"model":"a","stream":true}`, "up", ` {"stream_options":{"include_usage":true},"model":"up","stream":true}`},
		{`{"model":"a","stream":true,"stream_options":{}}`, "", `{"model":"a","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream_options":{"include_usage":false},"model":"a"}`, "b", `{"stream_options":{"include_usage":false,"include_usage":true},"model":"b"}`},
		{`{"model":"a","stream_options":null}`, "", `{"model":"a","stream_options":{"include_usage":true}}`},
		{`{"model":"a","stream_options": { } }`, "zz", `{"model":"zz","stream_options": { "include_usage":true} }`},
	}
	for _, c := range cases {
		var r Request
		if err := ScanRequest([]byte(c.body), &r); err != nil {
			t.Fatal(err)
		}
		got := string(AppendIncludeUsage(nil, []byte(c.body), &r, c.model))
		if got != c.want {
			t.Errorf("%s (model %q):\n got %s\nwant %s", c.body, c.model, got, c.want)
		}
	}
}

// FuzzAppendIncludeUsage: for any body the scanner accepts, the result is
// valid JSON whose last include_usage is true and whose model is rewritten.
func FuzzAppendIncludeUsage(f *testing.F) {
	f.Add(`{"model":"a","stream":true}`, "m")
	f.Add(`{"stream_options":{"x":1},"model":"a"}`, "")
	f.Add(`{"model":"a","stream_options":[1,2]}`, "q")
	f.Fuzz(func(t *testing.T, body, model string) {
		for _, c := range model {
			if c == '"' || c == '\\' || c < 0x20 || c > 0x7e {
				return // upstream names never need escaping (config validation)
			}
		}
		var r Request
		if ScanRequest([]byte(body), &r) != nil {
			return
		}
		out := AppendIncludeUsage(nil, []byte(body), &r, model)
		var v struct {
			Model         any `json:"model"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s → invalid JSON %s: %v", body, out, err)
		}
		if !v.StreamOptions.IncludeUsage {
			t.Fatalf("%s → include_usage not true: %s", body, out)
		}
		if model != "" && r.ModelStart >= 0 && v.Model != model {
			t.Fatalf("%s → model %v, want %q", body, v.Model, model)
		}
	})
}
