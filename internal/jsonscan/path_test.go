package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestGetElementsAppendString(t *testing.T) {
	doc := []byte(` {"choices":[{"message":{"role":"assistant","content":"h\u00e9 \"x\""}},{"message":{}}],"n":1,"n":2} `)
	if got := string(Get(doc, "n")); got != "2" {
		t.Fatalf("last duplicate must win: %q", got)
	}
	if Get(doc, "missing") != nil || Get(doc, "n", "deeper") != nil || Get([]byte(`{"a":`), "a") != nil {
		t.Fatal("missing, non-object and invalid paths must be nil")
	}
	var texts []string
	ok := Elements(Get(doc, "choices"), func(el []byte) bool {
		s, ok := AppendString(nil, Get(el, "message", "content"))
		if ok {
			texts = append(texts, string(s))
		}
		return true
	})
	if !ok || len(texts) != 1 || texts[0] != `hé "x"` {
		t.Fatalf("ok=%v texts=%q", ok, texts)
	}
	n := 0
	if !Elements([]byte(`[1, 2 ,3]`), func([]byte) bool { n++; return n < 2 }) || n != 2 {
		t.Fatalf("early stop: n=%d", n)
	}
	if Elements([]byte(`[1,]`), func([]byte) bool { return true }) || Elements([]byte(`{}`), func([]byte) bool { return true }) {
		t.Fatal("invalid arrays accepted")
	}
	if !Elements([]byte(` [ ] `), func([]byte) bool { t.Fatal("element in empty array"); return true }) {
		t.Fatal("empty array rejected")
	}
	if _, ok := AppendString(nil, []byte(`12`)); ok {
		t.Fatal("number read as string")
	}
	if !IsString([]byte(` "text" `), "text") || IsString([]byte(`"t\u0065xt"`), "text") {
		t.Fatal("IsString")
	}
}

func FuzzGet(f *testing.F) {
	f.Add([]byte(`{"a":{"b":"c"}}`), "a", "b")
	f.Add([]byte(`{"a":[1,{"b":2}]}`), "a", "x")
	f.Fuzz(func(t *testing.T, doc []byte, k1, k2 string) {
		v := Get(doc, k1, k2)
		if v == nil {
			return
		}
		if !json.Valid(v) {
			t.Fatalf("Get(%q, %q, %q) = %q is not valid JSON", doc, k1, k2, v)
		}
		var m map[string]map[string]json.RawMessage
		if json.Unmarshal(doc, &m) == nil && m[k1] != nil {
			if want, ok := m[k1][k2]; ok && string(want) != string(v) && json.Valid(want) {
				// encoding/json keeps the last duplicate too; compare values.
				var a, b any
				if json.Unmarshal(want, &a) == nil && json.Unmarshal(v, &b) == nil && !equalJSON(a, b) {
					t.Fatalf("Get %q, encoding/json %q", v, want)
				}
			}
		}
	})
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
