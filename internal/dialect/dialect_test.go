package dialect

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/sse"
)

// streamExample is a short documented stream of each dialect, frame by
// frame, with what the grammar must say about each frame.
type frameWant struct {
	frame                      string
	startup, terminal, isError bool
	usage                      Usage // zero: the frame reports no usage
}

var streamExamples = map[ID][]frameWant{
	Chat: {
		{frame: `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`, startup: true},
		{frame: `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}`},
		{frame: `data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}`},
		{frame: `data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":1}}}`,
			usage: Usage{Input: 9, Output: 3, Cached: 4, Reasoning: 1, Seen: true}},
		{frame: `data: {"error":{"message":"overloaded","type":"server_error","code":null}}`, isError: true},
		{frame: `data: [DONE]`, terminal: true},
	},
	Messages: {
		{frame: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":20,\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}",
			startup: true, usage: Usage{Input: 35, Output: 1, Cached: 20, CacheWrite: 5, Seen: true}},
		{frame: "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}", startup: true},
		{frame: "event: ping\ndata: {\"type\":\"ping\"}", startup: true},
		{frame: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}"},
		{frame: "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}"},
		// Cumulative: output replaces, the input counts stay from message_start.
		{frame: "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}",
			usage: Usage{Input: 35, Output: 15, Cached: 20, CacheWrite: 5, Seen: true}},
		{frame: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", isError: true},
		{frame: "event: message_stop\ndata: {\"type\":\"message_stop\"}", terminal: true},
	},
	Responses: {
		{frame: "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}", startup: true},
		{frame: "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\"}}", startup: true},
		{frame: "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{\"type\":\"message\"}}", startup: true},
		{frame: "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":3}", startup: true},
		{frame: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"delta\":\"Hi\"}"},
		{frame: "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"x\",\"sequence_number\":5}", isError: true},
		{frame: "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":6,\"response\":{\"id\":\"resp_1\",\"status\":\"failed\",\"usage\":null}}", isError: true},
		{frame: "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":7,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":30,\"input_tokens_details\":{\"cached_tokens\":10},\"output_tokens\":8,\"output_tokens_details\":{\"reasoning_tokens\":6},\"total_tokens\":38}}}",
			terminal: true, usage: Usage{Input: 30, Output: 8, Cached: 10, Reasoning: 6, Seen: true}},
	},
}

// bodyExamples are documented non-stream answers and the usage they report.
var bodyExamples = map[ID]struct {
	body string
	want Usage
}{
	Chat: {`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":12}}}`,
		Usage{Input: 100, Output: 20, Cached: 64, Reasoning: 12, Seen: true}},
	Messages: {`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"x"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":50}}`,
		Usage{Input: 2103, Output: 50, Cached: 2000, CacheWrite: 100, Seen: true}},
	Responses: {`{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":0},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380}}`,
		Usage{Input: 328, Output: 52, Seen: true}},
	Embeddings: {`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.0023064255,-0.009327292]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`,
		Usage{Input: 8, Seen: true}},
}

// errorExamples are documented error bodies of each dialect.
var errorExamples = map[ID]struct {
	status               int
	body                 string
	typ, anthropic, code string
	msg                  string
}{
	Chat: {429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
		"insufficient_quota", "", "insufficient_quota", "You exceeded your current quota"},
	Messages: {529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011"}`,
		"", "overloaded_error", "", "Overloaded"},
	Responses: {400, `{"error":{"message":"Previous response with id 'resp_x' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`,
		"invalid_request_error", "", "previous_response_not_found", "Previous response with id 'resp_x' not found."},
	Embeddings: {400, `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":null,"code":null}}`,
		"invalid_request_error", "", "", "This model's maximum context length is 8192 tokens."},
}

// TestTableComplete holds every entry of the table to the same standard:
// a new dialect that misses a field, an example or a consistent interrupt
// frame fails here.
func TestTableComplete(t *testing.T) {
	names := map[string]bool{}
	if len(All) != int(numIDs)-1 {
		t.Fatalf("All lists %d dialects, the table has %d", len(All), numIDs-1)
	}
	for _, id := range All {
		d := Of(id)
		if d.ID != id || !id.Valid() || id.String() != d.Name {
			t.Errorf("%d: entry id %d, name %q", id, d.ID, d.Name)
		}
		if d.Name == "" || names[d.Name] {
			t.Errorf("%d: empty or duplicate name %q", id, d.Name)
		}
		names[d.Name] = true
		if got, ok := ByName(d.Name); !ok || got != id {
			t.Errorf("%s: ByName = %v %v", d.Name, got, ok)
		}
		if d.Family != OpenAI && d.Family != Anthropic {
			t.Errorf("%s: no family", d.Name)
		}
		if !strings.HasPrefix(d.Path, "/") || d.Route != "/v1"+d.Path {
			t.Errorf("%s: path %q route %q", d.Name, d.Path, d.Route)
		}
		if got, ok := ByRoute([]byte(d.Route)); !ok || got != id {
			t.Errorf("%s: ByRoute = %v %v", d.Name, got, ok)
		}
		if d.CountTokensPath != "" && !strings.HasPrefix(d.CountTokensPath, d.Path+"/") {
			t.Errorf("%s: count-tokens path %q is not under %q", d.Name, d.CountTokensPath, d.Path)
		}
		if d.Auth != AuthBearer && d.Auth != AuthXAPIKey {
			t.Errorf("%s: auth %q", d.Name, d.Auth)
		}
		if d.RequestIDHeader == "" {
			t.Errorf("%s: no request-id header", d.Name)
		}
		if d.Translated && !d.Streams {
			t.Errorf("%s: translated but without a stream grammar: the converters translate streams", d.Name)
		}
		if d.Streams {
			if !d.DoneSentinel && len(d.Terminal) == 0 {
				t.Errorf("%s: a stream has no way to end", d.Name)
			}
			if d.NamedEvents && (len(d.ErrorEvents) == 0 || len(d.UsageEvents) == 0 || len(d.Startup) == 0) {
				t.Errorf("%s: named-event grammar lacks error, usage or startup events", d.Name)
			}
			if _, ok := streamExamples[id]; !ok {
				t.Errorf("%s: no stream example", d.Name)
			}
		} else if d.DoneSentinel || d.NamedEvents || len(d.Terminal)+len(d.ErrorEvents)+len(d.Startup)+len(d.UsageEvents) > 0 {
			t.Errorf("%s: a stream grammar on a dialect that does not stream", d.Name)
		}
		if _, ok := bodyExamples[id]; !ok {
			t.Errorf("%s: no body example", d.Name)
		}
		if _, ok := errorExamples[id]; !ok {
			t.Errorf("%s: no error example", d.Name)
		}
		if !d.Streams {
			if b := d.AppendInterrupt(nil, &apierror.Error{Status: 502, Message: "x"}, "req_1", StreamPosition{}); len(b) > 0 {
				t.Errorf("%s: an interrupt frame %q for a dialect that does not stream", d.Name, b)
			}
			continue
		}
		// The interrupt frame is an error in the dialect's own grammar.
		frames := parseFrames(t, d.AppendInterrupt(nil, &apierror.Error{Status: 502, Code: "stream_interrupted", Message: "cut \"short\""}, "req_1", StreamPosition{Seq: 7, ResponseID: []byte("resp_9")}))
		if len(frames) == 0 || !d.IsError(&frames[0]) {
			t.Errorf("%s: interrupt frame %v is not an error event of the dialect", d.Name, frames)
		}
		for _, f := range frames {
			if !json.Valid(f.Data) || d.NamedEvents != (len(f.Name) > 0) {
				t.Errorf("%s: interrupt frame data %q (event %q)", d.Name, f.Data, f.Name)
			}
		}
	}
}

func parseFrames(t *testing.T, b []byte) []sse.Event {
	t.Helper()
	out, err := sse.ReadAll(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("frames %q: %v", b, err)
	}
	return out
}

func TestStreamGrammar(t *testing.T) {
	for id, frames := range streamExamples {
		d := Of(id)
		var u Usage
		for _, f := range frames {
			evs := parseFrames(t, []byte(f.frame+"\n\n"))
			if len(evs) != 1 {
				t.Fatalf("%s: %q parsed into %d events", d.Name, f.frame, len(evs))
			}
			ev := &evs[0]
			if got := d.IsStartup(ev); got != f.startup {
				t.Errorf("%s: IsStartup(%s) = %v", d.Name, f.frame, got)
			}
			if got := d.IsTerminal(ev); got != f.terminal {
				t.Errorf("%s: IsTerminal(%s) = %v", d.Name, f.frame, got)
			}
			if got := d.IsError(ev); got != f.isError {
				t.Errorf("%s: IsError(%s) = %v", d.Name, f.frame, got)
			}
			found := d.EventUsage(ev, &u)
			if found != f.usage.Seen {
				t.Errorf("%s: EventUsage(%s) found = %v", d.Name, f.frame, found)
			}
			if found && u != f.usage {
				t.Errorf("%s: after %s usage = %+v, want %+v", d.Name, f.frame, u, f.usage)
			}
		}
	}
}

func TestBodyUsage(t *testing.T) {
	for id, ex := range bodyExamples {
		var u Usage
		if !Of(id).BodyUsage([]byte(ex.body), &u) || u != ex.want {
			t.Errorf("%s: usage %+v, want %+v", id, u, ex.want)
		}
		// The budget ledger settles Tokens: the whole prompt (cache reads
		// and writes counted once) and the whole answer.
		if u.Tokens() != ex.want.Input+ex.want.Output {
			t.Errorf("%s: tokens %d, want %d+%d", id, u.Tokens(), ex.want.Input, ex.want.Output)
		}
	}
	var u Usage
	for _, none := range []string{`{"usage":null}`, `{}`, `not json`, `{"usage":{"prompt_tokens":"9"}}`} {
		if Of(Chat).BodyUsage([]byte(none), &u) || u.Seen {
			t.Errorf("%q reported usage %+v", none, u)
		}
	}
}

func TestParseAndMapErrors(t *testing.T) {
	for id, ex := range errorExamples {
		e := Of(id).ParseError(ex.status, []byte(ex.body))
		if e.Status != ex.status || e.Type != ex.typ || e.AnthropicType != ex.anthropic || e.Code != ex.code || e.Message != ex.msg {
			t.Errorf("%s: parsed %+v", id, e)
		}
		// Rendered for each caller dialect, the body is that dialect's
		// error shape and keeps the message and a machine-readable code.
		for _, caller := range All {
			c := Of(caller)
			m := c.MapError(id, e)
			body := c.AppendError(nil, m, "req_1")
			back := c.ParseError(m.Status, body)
			if back.Message != ex.msg {
				t.Errorf("%s→%s: message %q", id, c.Name, back.Message)
			}
			if want := ex.code + ex.anthropic; back.Code == "" && back.Type != want && back.AnthropicType != want {
				t.Errorf("%s→%s: provider code %q lost: %s", id, c.Name, want, body)
			}
			if c.Family == OpenAI && m.Status == 529 {
				t.Errorf("%s→%s: 529 reached an OpenAI caller", id, c.Name)
			}
		}
	}
	m := Of(Messages).MapError(Chat, Of(Chat).ParseError(402, []byte(`{"error":{"message":"Insufficient credits","code":402}}`)))
	if m.AnthropicType != "billing_error" || m.Code != "402" || m.Status != 402 {
		t.Errorf("402 from an OpenAI-compatible upstream: %+v", m)
	}
	for _, tc := range []struct{ body, msg string }{
		{`<html>502 Bad Gateway</html>`, "the upstream provider answered HTTP 502 without a readable chat error body"},
		{`{"message":"Unauthorized"}`, "Unauthorized"},
		{`{"detail":"Not Found"}`, "Not Found"},
		{`{"error":"model overloaded"}`, "model overloaded"},
		{`{"error":{"message":"bad key sk-abcdefghijklmnop"}}`, "bad key [REDACTED]"},
	} {
		if got := Of(Chat).ParseError(502, []byte(tc.body)).Message; got != tc.msg {
			t.Errorf("%s: message %q, want %q", tc.body, got, tc.msg)
		}
	}
}
