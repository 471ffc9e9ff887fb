package mockprovider

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		body         string
		model        string
		stream       bool
		includeUsage bool
		err          bool
	}{
		{body: `{"model":"gpt-4o"}`, model: "gpt-4o"},
		{body: ` { "stream" : true , "model" : "m" , "stream_options" : { "include_usage" : true } } `, model: "m", stream: true, includeUsage: true},
		{body: `{"model":"m","stream":false,"stream_options":{"include_usage":false}}`, model: "m"},
		{body: `{"model":"m","stream":"true"}`, model: "m"},
		{body: `{"model":"m\"q\u00e9"}`, model: "m\"qé"},
		{body: `{"x":[1,-2.5e+3,{"model":"inner"},null,true,false,"s\\"],"model":"outer"}`, model: "outer"},
		{body: `{"model":"a","model":"b"}`, err: true},
		{body: `{"model":null}`, err: true},
		{body: `{"model":""}`, err: true},
		{body: `{}`, err: true},
		{body: ``, err: true},
		{body: `[]`, err: true},
		{body: `"model"`, err: true},
		{body: `{"model":"m"} x`, err: true},
		{body: `{"model":"m",}`, err: true},
		{body: `{"model":"m" "stream":true}`, err: true},
		{body: `{"model":"m","n":01}`, err: true},
		{body: `{"model":"m","n":1.}`, err: true},
		{body: `{"model":"m","s":"\x"}`, err: true},
		{body: "{\"model\":\"m\n\"}", err: true},
		{body: `{"model":"m","a":[1,2}`, err: true},
		{body: `{"model":"m","b":tru}`, err: true},
		{body: `{"model":"m"`, err: true},
	}
	for _, tc := range tests {
		info, err := parseRequest([]byte(tc.body))
		if (err != nil) != tc.err {
			t.Errorf("%s: err = %v, want error %t", tc.body, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if string(info.model) != tc.model || info.stream != tc.stream || info.includeUsage != tc.includeUsage {
			t.Errorf("%s: got model %q stream %t usage %t", tc.body, info.model, info.stream, info.includeUsage)
		}
		if !json.Valid(info.modelRaw) {
			t.Errorf("%s: raw model token %q is not JSON", tc.body, info.modelRaw)
		}
	}
}

func TestParseRequestDepthLimit(t *testing.T) {
	deep := `{"model":"m","x":` + string(repeat('[', 600)) + string(repeat(']', 600)) + `}`
	if _, err := parseRequest([]byte(deep)); err == nil {
		t.Error("600 levels of nesting accepted")
	}
}

func repeat(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// FuzzParseRequest checks the scanner against encoding/json:
// whatever it accepts must be a valid JSON object with the same model.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m"}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		`{"a":[1,2,{"b":null}],"model":"\u00e9"}`, `{"model":1}`, `[1]`, `{"model":"m",}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := parseRequest(body)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		// A map, because struct decoding matches keys case-insensitively
		// and the wire format does not.
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("accepted %q that encoding/json rejects: %v", body, err)
		}
		model, _ := v["model"].(string)
		if utf8.Valid(info.model) && model != string(info.model) {
			t.Fatalf("%q: model %q, encoding/json says %q", body, info.model, model)
		}
		if (v["stream"] == true) != info.stream {
			t.Fatalf("%q: stream %t, encoding/json says %v", body, info.stream, v["stream"])
		}
	})
}
