package translate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/sse"
)

// agentChatBody is a chat request shaped like a coding agent's turn: a
// long system prompt, 20 tools with schemas, and a 30-message tool loop.
func agentChatBody() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_tokens":8192,"messages":[{"role":"system","content":"`)
	b.WriteString(strings.Repeat(`You are a careful coding agent. Follow the repository's conventions.\n`, 60))
	b.WriteString(`"}`)
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, `,{"role":"user","content":"Please look at file %d and fix the \"bug\" in it."}`, i)
		fmt.Fprintf(&b, `,{"role":"assistant","content":"Reading the file.","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"src/file_%d.go\",\"limit\":400}"}}]}`, i, i)
		fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":"%s"}`, i, strings.Repeat(`package main\nfunc main() { println(\"hi\") }\n`, 20))
	}
	b.WriteString(`],"tools":[`)
	for i := 0; i < 20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function","function":{"name":"tool_%d","description":"Tool number %d does one careful thing.","parameters":{"type":"object","properties":{"path":{"type":"string","description":"A path"},"limit":{"type":"integer"},"flags":{"type":"array","items":{"type":"string"}}},"required":["path"]}}}`, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// agentMessagesBody is the same conversation as Claude Code sends it.
func agentMessagesBody(b *testing.B) []byte {
	tr := New(dialect.Chat, dialect.Messages, Options{Model: "claude"})
	out, err := tr.Request(nil, agentChatBody())
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func benchRequest(b *testing.B, from, to dialect.ID, body []byte) {
	tr := New(from, to, Options{Model: "upstream-model"})
	out, err := tr.Request(nil, body)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Reset(from, to, Options{Model: "upstream-model"})
		if out, err = tr.Request(out[:0], body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestChatToMessages: an OpenAI-SDK agent's turn (≈25 KB) to
// an Anthropic upstream.
func BenchmarkRequestChatToMessages(b *testing.B) {
	benchRequest(b, dialect.Chat, dialect.Messages, agentChatBody())
}

// BenchmarkRequestMessagesToChat: Claude Code's turn to a chat upstream.
func BenchmarkRequestMessagesToChat(b *testing.B) {
	benchRequest(b, dialect.Messages, dialect.Chat, agentMessagesBody(b))
}

// BenchmarkRequestResponsesToChat: Codex's turn to a chat upstream.
func BenchmarkRequestResponsesToChat(b *testing.B) {
	tr := New(dialect.Chat, dialect.Responses, Options{Model: "gpt"})
	body, err := tr.Request(nil, agentChatBody())
	if err != nil {
		b.Fatal(err)
	}
	benchRequest(b, dialect.Responses, dialect.Chat, body)
}

// streamEvents are single upstream events translated in the benchmarks: a
// text delta and a tool-argument delta of each upstream dialect.
var benchEvents = []struct {
	name     string
	from, to dialect.ID
	prime    []string // events before the measured one (open the part)
	event    sse.Event
}{
	{"chat text delta to messages", dialect.Messages, dialect.Chat,
		[]string{chatChunkHead + `[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`},
		sse.Event{Data: []byte(chatChunkHead + `[{"index":0,"delta":{"content":" the quick brown fox"},"logprobs":null,"finish_reason":null}],"usage":null}`)}},
	{"chat tool args delta to messages", dialect.Messages, dialect.Chat,
		[]string{chatChunkHead + `[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}`},
		sse.Event{Data: []byte(chatChunkHead + `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"src/"}}]},"finish_reason":null}]}`)}},
	{"messages text delta to chat", dialect.Chat, dialect.Messages,
		[]string{"message_start\x00" + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","usage":{"input_tokens":25,"output_tokens":1}}}`,
			"content_block_start\x00" + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		sse.Event{Name: []byte("content_block_delta"), Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the quick brown fox"}}`)}},
	{"messages text delta to responses", dialect.Responses, dialect.Messages,
		[]string{"message_start\x00" + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","usage":{"input_tokens":25,"output_tokens":1}}}`,
			"content_block_start\x00" + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		sse.Event{Name: []byte("content_block_delta"), Data: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the quick brown fox"}}`)}},
	{"responses text delta to messages", dialect.Messages, dialect.Responses,
		[]string{"response.created\x00" + `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"gpt-5","output":[],"usage":null}}`,
			"response.content_part.added\x00" + `{"type":"response.content_part.added","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`},
		sse.Event{Name: []byte("response.output_text.delta"), Data: []byte(`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" the quick brown fox","logprobs":[]}`)}},
}

// primed returns a translator that has seen the events before the
// measured one.
func primed(tb testing.TB, from, to dialect.ID, prime []string) *Translator {
	tr := New(from, to, Options{Model: "m", Created: 1})
	if _, err := tr.Request(nil, []byte(minimalRequest[from])); err != nil {
		tb.Fatal(err)
	}
	for _, p := range prime {
		ev := sse.Event{Data: []byte(p)}
		if name, d, ok := strings.Cut(p, "\x00"); ok {
			ev = sse.Event{Name: []byte(name), Data: []byte(d)}
		}
		if _, err := tr.Event(nil, &ev); err != nil {
			tb.Fatal(err)
		}
	}
	return tr
}

// BenchmarkStreamEvent translates one content event (the events that
// make up almost all of a stream) into the caller's dialect.
func BenchmarkStreamEvent(b *testing.B) {
	for _, be := range benchEvents {
		b.Run(be.name, func(b *testing.B) {
			tr := primed(b, be.from, be.to, be.prime)
			out := make([]byte, 0, 4096)
			b.SetBytes(int64(len(be.event.Data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				if out, err = tr.Event(out[:0], &be.event); err != nil {
					b.Fatal(err)
				}
				if tr.st.acc != nil {
					tr.st.acc = tr.st.acc[:0] // a Responses caller keeps the text: don't let it grow unboundedly
				}
			}
		})
	}
}

// BenchmarkResponseMessagesToChat translates a non-stream Anthropic answer
// with text and a tool call for a chat caller.
func BenchmarkResponseMessagesToChat(b *testing.B) {
	body := []byte(bodyFixtures[3].body)
	tr := New(dialect.Chat, dialect.Messages, Options{Model: "m"})
	out := make([]byte, 0, 4096)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var err error
		if out, err = tr.Response(out[:0], body); err != nil {
			b.Fatal(err)
		}
	}
}
