package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestAppendReplacingStrings(t *testing.T) {
	for _, c := range []struct {
		doc, want string
		n         int
	}{
		{`{"id":"c1","model":"mock-demo","choices":[]}`, `{"id":"c1","model":"demo","choices":[]}`, 1},
		{`data: {"type":"message_start","message":{"model" : "claude-x","content":[]}}`, `data: {"type":"message_start","message":{"model" : "demo","content":[]}}`, 1},
		{`{"model":"a","x":{"model":"b"},"m":{"model":1}}`, `{"model":"demo","x":{"model":"demo"},"m":{"model":1}}`, 2},
		{`{"content":"say \"model\":\"x\"","model":"m"}`, `{"content":"say \"model\":\"x\"","model":"demo"}`, 1},
		{`{"content":"a\\","model":"m\"q"}`, `{"content":"a\\","model":"demo"}`, 1},
		{`{"k":"model","v":1}`, `{"k":"model","v":1}`, 0},
		{`{"choices":[]}`, `{"choices":[]}`, 0},
	} {
		got, n := AppendReplacingStrings(nil, []byte(c.doc), "model", []byte(`"demo"`))
		if string(got) != c.want || n != c.n {
			t.Errorf("%s:\n got %s (%d)\nwant %s (%d)", c.doc, got, n, c.want, c.n)
		}
	}
}

// FuzzAppendReplacingStrings: on any valid JSON the output is valid JSON,
// and every "model" string member, and nothing else, reads the new value.
func FuzzAppendReplacingStrings(f *testing.F) {
	for _, s := range []string{`{"model":"x"}`, `{"a":{"model":"y"},"b":["model",{"model":"z"}]}`, `{"model":1,"c":"\"model\":\"q\""}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		out, _ := AppendReplacingStrings(nil, []byte(doc), "model", []byte(`"new\"name"`))
		if !json.Valid(out) {
			t.Fatalf("invalid output %s from %s", out, doc)
		}
		var a, b any
		_ = json.Unmarshal([]byte(doc), &a)
		_ = json.Unmarshal(out, &b)
		if want := rename(a); !equalJSON(want, b) {
			t.Fatalf("%s -> %s", doc, out)
		}
	})
}

// rename is the property's oracle: v with every "model" string member
// set to the new name.
func rename(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if _, s := e.(string); s && k == "model" {
				x[k] = `new"name`
			} else {
				x[k] = rename(e)
			}
		}
	case []any:
		for i := range x {
			x[i] = rename(x[i])
		}
	}
	return v
}

func TestAppendReplacingStringsAllocatesNothing(t *testing.T) {
	doc := []byte(`data: {"id":"c","object":"chat.completion.chunk","model":"mock-demo","choices":[{"delta":{"content":"hi"}}]}`)
	dst := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { AppendReplacingStrings(dst[:0], doc, "model", []byte(`"demo"`)) }); n != 0 {
		t.Fatalf("%.0f allocations", n)
	}
}
