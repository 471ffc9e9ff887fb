package jsonscan

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func dropTools(k []byte) bool { return string(k) == "tools" || string(k) == "stream" }

func TestAppendWithout(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"model":"m","stream":true,"tools":[{"x":1}],"messages":[]}`, `{"model":"m","messages":[]}`},
		{` { "t\u006fols" : [] , "a" : 1 } `, `{"a" : 1}`},
		{`{"stream":true}`, `{}`},
		{`{}`, `{}`},
		{`{"a":{"tools":1},"b":"stream"}`, `{"a":{"tools":1},"b":"stream"}`},
	} {
		got, err := AppendWithout([]byte("x"), []byte(tc.in), dropTools)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if string(got) != "x"+tc.want {
			t.Fatalf("%s: got %s, want %s", tc.in, got[1:], tc.want)
		}
	}
	for _, bad := range []string{`[1]`, `{"a":}`, `{"a":1} x`, ``} {
		if out, err := AppendWithout([]byte("x"), []byte(bad), dropTools); err == nil || string(out) != "x" {
			t.Fatalf("%q: accepted or left partial output %q", bad, out)
		}
	}
}

func TestScanRequestN(t *testing.T) {
	var r Request
	if err := ScanRequest([]byte(`{"model":"m","n":3}`), &r); err != nil || r.N != 3 {
		t.Fatalf("n = %d, %v", r.N, err)
	}
	var fe *FieldValueError
	if err := ScanRequest([]byte(`{"model":"m","n":"3"}`), &r); !errors.As(err, &fe) || fe.Field != "n" {
		t.Fatalf("non-numeric n: %v", err)
	}
}

func FuzzAppendWithout(f *testing.F) {
	for _, s := range []string{`{"model":"m","stream":true,"tools":[]}`, `{"a":[1,{"tools":2}],"stream":false}`, `{}`, `{"t\u006fols":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := AppendWithout(nil, body, dropTools)
		var want map[string]any
		if json.Unmarshal(body, &want) != nil {
			if err == nil && !json.Valid(body) {
				t.Fatalf("accepted invalid JSON %q", body)
			}
			return
		}
		if err != nil {
			return // nesting beyond MaxDepth, or duplicate-insensitive cases the scanner refuses
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output is not JSON: %q from %q", out, body)
		}
		delete(want, "tools")
		delete(want, "stream")
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}
