package tokenest

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
}

func TestEstimate(t *testing.T) {
	many := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = "0"
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	cases := []struct {
		name      string
		body      string
		limit     int
		tokens    int
		exhausted bool
	}{
		// "user" (4) + "hi" (2) + keys role (4) and content (7) = 17 quarters.
		{"ascii quarters", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 1000, 4, false},
		{"non-ascii counts one per code point", `{"messages":["世界世界"]}`, 1000, 4, false},
		{"escapes are code points", `{"messages":["\u4e16\u754c\n\"", "\ud83d\ude00"]}`, 1000, 3, false},
		{"numbers and literals count nothing", `{"messages":[1,2.5e3,true,false,null]}`, 1000, 0, false},
		{"other fields are not walked", `{"model":"` + strings.Repeat("x", 4000) + `","messages":[]}`, 100, 0, false},
		{"limit caps the estimate", `{"messages":["` + strings.Repeat("a", 4000) + `"]}`, 100, 100, false},
		{"tools use the remaining allowance", `{"tools":[{"name":"` + strings.Repeat("a", 200) + `"}],"messages":["` + strings.Repeat("b", 200) + `"]}`, 1000, 101, false},
		{"system and instructions count", `{"system":"` + strings.Repeat("s", 40) + `","instructions":"` + strings.Repeat("i", 40) + `"}`, 1000, 20, false},
		{"string input is one message", `{"input":"` + strings.Repeat("q", 400) + `"}`, 1000, 100, false},
		{"input flattened one level", `{"input":[["abcd"],"efgh"]}`, 1000, 2, false},
		{"an object at depth 11 is walked", `{"messages":[` + nested(11) + `]}`, 1000, 2, false},
		{"an object at depth 12 exhausts the walk", `{"messages":[` + nested(12) + `]}`, 1000, 2, true},
		{"node bound exhausts", `{"messages":` + many(MaxNodes+1) + `}`, 1000, 0, true},
		{"node bound exactly fits", `{"messages":` + many(MaxNodes) + `}`, 1000, 0, false},
		{"malformed counts as exhausted", `{"messages":["abc`, 1000, 0, true},
		{"not an object", `[1,2]`, 1000, 0, true},
		{"no conversation", `{"model":"x"}`, 1000, 0, false},
	}
	for _, c := range cases {
		got := Estimate([]byte(c.body), c.limit)
		if got.Tokens != c.tokens || got.Exhausted != c.exhausted {
			t.Errorf("%s: got %+v, want tokens %d exhausted %v", c.name, got, c.tokens, c.exhausted)
		}
	}
}

func TestHeavy(t *testing.T) {
	if (Result{Tokens: 31999}).Heavy(32000) || !(Result{Tokens: 32000}).Heavy(32000) || !(Result{Exhausted: true}).Heavy(32000) {
		t.Fatal("Heavy")
	}
	// 128,000 ASCII characters are exactly 32,000 tokens.
	body := `{"messages":[{"content":"` + strings.Repeat("a", 128000-7) + `"}]}`
	if r := Estimate([]byte(body), 32000); !r.Heavy(32000) || r.Exhausted {
		t.Fatalf("128k ascii: %+v", r)
	}
	body = `{"messages":[{"content":"` + strings.Repeat("a", 128000-7-1) + `"}]}`
	if r := Estimate([]byte(body), 32000); r.Heavy(32000) {
		t.Fatalf("one short of the limit: %+v", r)
	}
}

// reference is a straightforward decode-and-walk implementation of the
// same rules, used as an oracle for valid JSON.
func reference(body []byte, limit int) (int, bool, bool) {
	var top map[string]any
	if json.Unmarshal(body, &top) != nil {
		return 0, false, false
	}
	var items []any
	for _, k := range []string{"messages", "input", "system", "instructions"} {
		v, ok := top[k]
		if !ok {
			continue
		}
		if arr, ok := v.([]any); ok && (k == "messages" || k == "input" || k == "system" || k == "instructions") {
			for _, e := range arr {
				if inner, ok := e.([]any); ok {
					items = append(items, inner...)
				} else {
					items = append(items, e)
				}
			}
		} else {
			items = append(items, v)
		}
	}
	q, budget, nodes := int64(0), int64(limit)*4, MaxNodes
	exhausted := false
	count := func(s string) {
		for _, r := range s {
			if r < 0x80 {
				q++
			} else {
				q += 4
			}
		}
	}
	var walk func(v any, d int) bool
	walk = func(v any, d int) bool {
		if q >= budget {
			return false
		}
		if nodes == 0 {
			exhausted = true
			return false
		}
		nodes--
		switch x := v.(type) {
		case string:
			count(x)
		case map[string]any:
			if d >= MaxDepth {
				exhausted = true
				return false
			}
			for k, e := range x {
				count(k)
				if !walk(e, d+1) {
					return false
				}
			}
		case []any:
			if d >= MaxDepth {
				exhausted = true
				return false
			}
			for _, e := range x {
				if !walk(e, d+1) {
					return false
				}
			}
		}
		return true
	}
	ok := true
	for _, it := range items {
		if ok = walk(it, 1); !ok {
			break
		}
	}
	if ok && !exhausted {
		if tools, has := top["tools"]; has {
			if arr, isArr := tools.([]any); isArr {
				for _, it := range arr {
					if !walk(it, 1) {
						break
					}
				}
			} else {
				walk(tools, 1)
			}
		}
	}
	tok := int(q / 4)
	if q >= budget {
		tok = limit
	}
	return tok, exhausted, true
}

func FuzzEstimate(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"input":[["abcd"],"efgh"],"tools":[{"a":[1,2,{"b":"c"}]}]}`,
		`{"messages":["\u4e16\ud83d\ude00"],"system":"x"}`,
		`{"messages":[` + nested(12) + `]}`,
		`{"messages":["abc`,
	} {
		f.Add([]byte(s), 50)
	}
	f.Fuzz(func(t *testing.T, body []byte, limit int) {
		limit = limit%100000 + 1
		if limit <= 0 {
			limit = 1
		}
		got := Estimate(body, limit)
		if got.Tokens < 0 || got.Tokens > limit {
			t.Fatalf("tokens %d outside [0, %d]", got.Tokens, limit)
		}
		// For valid JSON objects with unique keys and valid UTF-8 the walk
		// agrees with the decoding oracle whenever neither stopped early
		// (the oracle walks object keys in random order).
		if !utf8.Valid(body) || strings.Contains(string(body), `\u`) {
			return
		}
		tok, exh, ok := reference(body, limit)
		if !ok || exh || got.Exhausted || tok >= limit || got.Tokens >= limit {
			return
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(body, &probe) != nil {
			return
		}
		if tok != got.Tokens {
			t.Fatalf("estimate %d, oracle %d for %q", got.Tokens, tok, body)
		}
	})
}

// TestWordAtATimeScan puts each kind of special byte at every offset of
// strings around the 8-byte word size and checks the count.
func TestWordAtATimeScan(t *testing.T) {
	for n := 0; n < 40; n++ {
		for pos := 0; pos < n; pos++ {
			for _, sp := range []struct {
				text     string
				quarters int
			}{{`\"`, 1}, {`\\`, 1}, {"é", 4}, {`\n`, 1}, {`\u00e9`, 4}} {
				content := strings.Repeat("a", pos) + sp.text + strings.Repeat("b", n-pos)
				want := pos + sp.quarters + (n - pos)
				body := `{"messages":["` + content + `"]}`
				got := Estimate([]byte(body), 1000)
				if got.Tokens != want/4 || got.Exhausted {
					t.Fatalf("%q: %+v, want %d quarters", content, got, want)
				}
			}
		}
	}
}
