package translate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
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
