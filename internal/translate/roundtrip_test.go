package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// meaning renders what a request asks for, in a form that ignores how a
// dialect spells it: the round-trip property compares these.
func meaning(t *testing.T, r *ir.Request) string {
	t.Helper()
	var b strings.Builder
	text := func(rs []byte) string {
		v, ok := ir.UnescapeRS(nil, rs)
		if !ok {
			t.Fatalf("bad raw string %q", rs)
		}
		return string(v)
	}
	canon := func(raw []byte, escaped bool) string {
		if escaped {
			raw = []byte(text(raw))
		}
		if len(raw) == 0 {
			return "{}"
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "invalid:" + string(raw)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	var part func(p *ir.Part)
	part = func(p *ir.Part) {
		switch p.Kind {
		case ir.KindText:
			fmt.Fprintf(&b, "  text %q\n", text(p.Text))
		case ir.KindImage, ir.KindDocument:
			fmt.Fprintf(&b, "  media %d src %d %q %q\n", p.Kind, p.Src, p.MediaType, p.Data)
		case ir.KindToolCall:
			fmt.Fprintf(&b, "  call %s %s %s\n", p.ID, p.Name, canon(p.Args, p.ArgsEscaped))
		case ir.KindToolResult:
			fmt.Fprintf(&b, "  result %s error=%v\n", p.ID, p.IsError)
			for _, q := range r.ResultParts(p) {
				part(&q)
			}
		case ir.KindReasoning:
			fmt.Fprintf(&b, "  reasoning origin %d\n", p.Origin)
		}
	}
	var sys []string
	for _, p := range r.System {
		sys = append(sys, text(p.Text))
	}
	fmt.Fprintf(&b, "system %q\n", strings.Join(sys, "\n\n"))
	for _, m := range r.Messages {
		fmt.Fprintf(&b, "message %d\n", m.Role)
		for i := m.Parts.Lo; i < m.Parts.Hi; i++ {
			part(&r.Parts[i])
		}
	}
	for _, tl := range r.Tools {
		fmt.Fprintf(&b, "tool %d %s %q %s\n", tl.Kind, tl.Name, tl.Description, canon(toolSchema(&tl), false))
	}
	e := r.Reasoning.Effort
	if r.Reasoning.Budget > 0 {
		e = effortForBudget(r.Reasoning.Budget)
	}
	fmt.Fprintf(&b, "choice %d %s parallel %d max %d temp %s top_p %s stop %q stream %v effort %s format %d %s\n",
		r.Choice.Mode, r.Choice.Name, r.Parallel, r.MaxTokens, r.Temperature, r.TopP, r.Stop, r.Stream, e, r.Format.Kind, canon(r.Format.Schema, false))
	return b.String()
}

// roundTrips are requests whose every field each dialect can carry.
var roundTrips = map[dialect.ID][]string{
	dialect.Chat: {
		`{"model":"m","max_tokens":40000,"stream":true,"reasoning_effort":"high","messages":[
			{"role":"system","content":"Be kind."},
			{"role":"user","content":[{"type":"text","text":"Look \"here\"\n"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ"}}]},
			{"role":"assistant","content":"Sure.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"look","arguments":"{\"at\":[1,2]}"}},{"id":"call_2","type":"function","function":{"name":"zoom","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"a cat"},
			{"role":"tool","tool_call_id":"call_2","content":"closer"},
			{"role":"assistant","content":"It is a cat."},
			{"role":"user","content":"Thanks ✓"}],
			"tools":[{"type":"function","function":{"name":"look","description":"Look at","parameters":{"type":"object","properties":{"at":{"type":"array"}}}}},{"type":"function","function":{"name":"zoom","parameters":{"type":"object","properties":{}}}}],
			"tool_choice":"auto","parallel_tool_calls":false}`,
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"pick one"}],"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}}],"tool_choice":"required","temperature":0.3,"top_p":0.8}`,
	},
	dialect.Messages: {
		`{"model":"m","max_tokens":512,"temperature":0.5,"system":"Answer in French.","messages":[
			{"role":"user","content":"Bonjour"},
			{"role":"assistant","content":[{"type":"text","text":"Je vérifie."},{"type":"tool_use","id":"toolu_9","name":"search","input":{"q":"météo"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"soleil","is_error":false},{"type":"text","text":"Alors ?"}]}],
			"tools":[{"name":"search","description":"Search the web","input_schema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}],
			"tool_choice":{"type":"tool","name":"search"}}`,
	},
	dialect.Responses: {
		`{"model":"m","instructions":"Be brief.","max_output_tokens":7000,"reasoning":{"effort":"low"},"input":[
			{"role":"user","content":"List files"},
			{"type":"function_call","call_id":"c1","name":"ls","arguments":"{\"dir\":\".\"}"},
			{"type":"function_call_output","call_id":"c1","output":"a.go b.go"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a.go and b.go"}]},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"Read a.go"},{"type":"input_image","image_url":"https://example.com/x.png","detail":"auto"}]}],
			"tools":[{"type":"function","name":"ls","description":"List","parameters":{"type":"object","properties":{"dir":{"type":"string"}}},"strict":false}],
			"tool_choice":"auto","text":{"format":{"type":"json_schema","name":"files","schema":{"type":"object","properties":{"f":{"type":"array"}}}}}}`,
	},
}

// TestRoundTrip: X → Y → X keeps what the request means, for every pair.
func TestRoundTrip(t *testing.T) {
	for from, bodies := range roundTrips {
		for _, body := range bodies {
			orig := New(from, from, Options{Model: "m"})
			if _, err := orig.Request(nil, []byte(body)); err != nil {
				t.Fatalf("%s: %v", from, err)
			}
			want := meaning(t, orig.IR())
			for _, via := range dialect.Translated {
				there := New(from, via, Options{Model: "m"})
				mid, err := there.Request(nil, []byte(body))
				if err != nil {
					t.Fatalf("%s→%s: %v", from, via, err)
				}
				back := New(via, from, Options{Model: "m"})
				end, err := back.Request(nil, mid)
				if err != nil {
					t.Fatalf("%s→%s→%s: %v\n%s", from, via, from, err, mid)
				}
				again := New(from, from, Options{Model: "m"})
				if _, err := again.Request(nil, end); err != nil {
					t.Fatalf("%s→%s→%s output unreadable: %v", from, via, from, err)
				}
				if got := meaning(t, again.IR()); got != want {
					t.Errorf("%s→%s→%s changed the request:\n got: %s\nwant: %s\nvia: %s", from, via, from, got, want, mid)
				}
			}
		}
	}
}
