package fusion

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/omniroute/gateway/internal/catalog"
)

func TestJudgeBody(t *testing.T) {
	const p = "Pick \"one\":\n<a>"
	msg := `{"role":"user","content":"Pick \"one\":\n\u003ca\u003e"}`
	for _, tc := range []struct {
		name string
		s    catalog.Surface
		in   string
		want string
	}{
		{"chat", catalog.Chat, `{"model":"m","messages":[{"role":"user","content":"q"}],"stream":true,"tools":[]}`,
			`{"model":"m","messages":[{"role":"user","content":"q"},` + msg + `],"stream":true,"tools":[]}`},
		{"chat, empty", catalog.Chat, `{"model":"m","messages":[ ]}`, `{"model":"m","messages":[ ` + msg + `]}`},
		{"chat, missing", catalog.Chat, `{"model":"m"}`, `{"model":"m","messages":[` + msg + `]}`},
		{"messages", catalog.Messages, `{ "messages" : [ {"role":"user","content":[{"type":"text","text":"q"}]} ] , "max_tokens":9}`,
			`{ "messages" : [ {"role":"user","content":[{"type":"text","text":"q"}]} ,` + msg + `] , "max_tokens":9}`},
		{"responses, string input", catalog.Responses, `{"model":"m","input":"q","instructions":"be brief"}`,
			`{"model":"m","input":[{"role":"user","content":"q"},` + msg + `],"instructions":"be brief"}`},
		{"responses, list input", catalog.Responses, `{"input":[{"role":"user","content":"q"}]}`, `{"input":[{"role":"user","content":"q"},` + msg + `]}`},
		{"responses, no input", catalog.Responses, `{"previous_response_id":"r1"}`, `{"previous_response_id":"r1","input":[` + msg + `]}`},
		{"responses, empty object", catalog.Responses, `{}`, `{"input":[` + msg + `]}`},
	} {
		got, err := JudgeBody([]byte("x"), tc.s, []byte(tc.in), p)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != "x"+tc.want {
			t.Fatalf("%s:\n got %s\nwant %s", tc.name, got[1:], tc.want)
		}
		if !json.Valid(got[1:]) {
			t.Fatalf("%s: invalid JSON", tc.name)
		}
	}
	for _, bad := range []string{`{"messages":"q"}`, `{"messages":{}}`, `[1]`, `{"messages":[}`} {
		if out, err := JudgeBody([]byte("x"), catalog.Chat, []byte(bad), p); err == nil || string(out) != "x" {
			t.Fatalf("%s: accepted (%s)", bad, out)
		}
	}
}

func FuzzJudgeBody(f *testing.F) {
	for _, s := range []string{`{"messages":[]}`, `{"input":"x","a":[1,{"b":null}]}`, `{"input":[{"role":"user"}]}`, `{}`, `{"messages":[1],"messages":[2]}`} {
		f.Add([]byte(s), uint8(1), "p{{answers}}")
	}
	f.Fuzz(func(t *testing.T, body []byte, surf uint8, prompt string) {
		s := catalog.Surfaces[int(surf)%len(catalog.Surfaces)]
		out, err := JudgeBody(nil, s, body, prompt)
		if err != nil {
			return
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("judge body is not a JSON object: %q from %q", out, body)
		}
		var in map[string]any
		if json.Unmarshal(body, &in) != nil {
			t.Fatalf("accepted a body Go cannot decode: %q", body)
		}
		field := "messages"
		if s == catalog.Responses {
			field = "input"
		}
		list, ok := got[field].([]any)
		if !ok || len(list) == 0 {
			t.Fatalf("no %s list in %s", field, out)
		}
		last, _ := list[len(list)-1].(map[string]any)
		if last["role"] != "user" || last["content"] != toValidUTF8(prompt) {
			t.Fatalf("last message %v, want the prompt %q", last, prompt)
		}
		delete(got, field)
		delete(in, field)
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("other members changed: %v vs %v", got, in)
		}
	})
}

func toValidUTF8(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

func TestPanelAnswer(t *testing.T) {
	for _, tc := range []struct {
		s    catalog.Surface
		body string
		want string
		ok   bool
	}{
		{catalog.Chat, `{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`, "hi", true},
		{catalog.Chat, `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}`, "ab", true},
		{catalog.Chat, `{"choices":[{"message":{"content":null,"tool_calls":[]}}]}`, "", false},
		{catalog.Chat, `{"choices":[]}`, "", false},
		{catalog.Messages, `{"content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"yes"}]}`, "yes", true},
		{catalog.Responses, `{"output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"r"}]}]}`, "r", true},
		{catalog.Responses, `not json`, "", false},
	} {
		got, ok := Answer(tc.s, []byte(tc.body))
		if got != tc.want || ok != tc.ok {
			t.Fatalf("%s %s: %q %v", tc.s, tc.body, got, ok)
		}
	}
}

func TestQuorum(t *testing.T) {
	for _, tc := range []struct{ configured, panel, want int }{
		{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {0, 5, 3}, // a majority
		{2, 5, 2}, {5, 5, 5},
		{4, 3, 3}, // never more than the panel
	} {
		if got := (&Model{quorum: tc.configured}).Quorum(tc.panel); got != tc.want {
			t.Errorf("quorum %d of %d members: %d, want %d", tc.configured, tc.panel, got, tc.want)
		}
	}
}
