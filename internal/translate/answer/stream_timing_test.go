package answer

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/sse"
)

// chatChunkHead opens a chat chunk as OpenAI sends it.
const chatChunkHead = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":`

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

// primed returns a converter that has seen the events before the
// measured one, for a request without custom tools (a chat caller's
// asking for the usage chunk, as its stream requests do).
func primed(tb testing.TB, from, to dialect.ID, prime []string) *Converter {
	tr := &Converter{}
	tr.Reset(from, to, Options{Model: "m", Created: 1})
	tr.SetRequest(nil, from == dialect.Chat)
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
