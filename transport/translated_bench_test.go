package transport_test

import "testing"

// benchPostPath is benchPost on any inference path, with the key in
// X-Api-Key.
func benchPostPath(b *testing.B, addr, path, body string) {
	benchPostAuth(b, addr, path, "X-Api-Key", "bench-key", body)
}

const benchMessagesBody = `{"model":"demo","max_tokens":256,"system":"You are a coding agent.","messages":[{"role":"user","content":"Refactor this function please."}]`

// BenchmarkTranslatedMessagesToChat is BenchmarkPassThrough's request sent
// as Anthropic Messages to the chat-only mock: the difference is the cost
// of translating the request and the answer. The Stream variant converts
// every event of a streamed answer as well.
func BenchmarkTranslatedMessagesToChat(b *testing.B) {
	gw, _ := benchGateway(b)
	benchPostPath(b, gw, "/v1/messages", benchMessagesBody+`}`)
}

func BenchmarkTranslatedMessagesToChatStream(b *testing.B) {
	gw, _ := benchGateway(b)
	benchPostPath(b, gw, "/v1/messages", benchMessagesBody+`,"stream":true}`)
}

func BenchmarkPassThroughStream(b *testing.B) {
	gw, _ := benchGateway(b)
	benchPostPath(b, gw, "/v1/chat/completions", benchBody[:len(benchBody)-1]+`,"stream":true}`)
}
