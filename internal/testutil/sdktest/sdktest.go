// Package sdktest is test only: a stream of the official SDKs read to its
// end the way a client built on them reads it, into what the SDK builds
// from it (the Anthropic message, the Chat Completions accumulator, the
// Responses API's completed response). The
// tests of the mock provider, the translations and the gateway all check
// what such a client ends up with; this is the one place that reads the
// stream for them.
package sdktest

import (
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	assestream "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// Message reads an Anthropic Messages stream to its end into the message
// the SDK's Accumulate builds, closes it, and returns the message, how
// many events it read and the stream's error. An event Accumulate refuses
// fails t: a client would have stopped there.
func Message(t testing.TB, s *assestream.Stream[anthropic.MessageStreamEventUnion]) (anthropic.Message, int, error) {
	t.Helper()
	defer s.Close() // the SDK stops at the terminal event; closing frees the connection
	var msg anthropic.Message
	events := 0
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			t.Fatalf("the SDK cannot accumulate event %d: %v", events, err)
		}
		events++
	}
	return msg, events, s.Err()
}

// Chat reads a Chat Completions stream to its end into the SDK's
// accumulator, closes it, and returns the accumulator, the chunks it read
// in order and the stream's error. A chunk the accumulator refuses fails
// t: a client would have stopped there.
func Chat(t testing.TB, s *ssestream.Stream[openai.ChatCompletionChunk]) (openai.ChatCompletionAccumulator, []openai.ChatCompletionChunk, error) {
	t.Helper()
	defer s.Close() // the SDK stops at the terminal event; closing frees the connection
	var acc openai.ChatCompletionAccumulator
	var chunks []openai.ChatCompletionChunk
	for s.Next() {
		c := s.Current()
		if !acc.AddChunk(c) {
			t.Fatalf("the SDK's accumulator refuses chunk %d: %s", len(chunks), c.RawJSON())
		}
		chunks = append(chunks, c)
	}
	return acc, chunks, s.Err()
}

// Responses reads a Responses stream to its end, closes it, and returns
// its events in order, the response its response.completed event carries
// (nil without one) and the stream's error. The SDK has no accumulator
// for it; Deltas joins what the events spelled out piece by piece.
func Responses(s *ssestream.Stream[responses.ResponseStreamEventUnion]) ([]responses.ResponseStreamEventUnion, *responses.Response, error) {
	defer s.Close() // the SDK stops at the terminal event; closing frees the connection
	var events []responses.ResponseStreamEventUnion
	var final *responses.Response
	for s.Next() {
		ev := s.Current()
		events = append(events, ev)
		if c, ok := ev.AsAny().(responses.ResponseCompletedEvent); ok {
			final = &c.Response
		}
	}
	return events, final, s.Err()
}

// Deltas joins the Delta of the events of type typ, in order: the text
// (response.output_text.delta) or a call's arguments
// (response.function_call_arguments.delta) as they streamed.
func Deltas(events []responses.ResponseStreamEventUnion, typ string) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Type == typ {
			b.WriteString(ev.Delta)
		}
	}
	return b.String()
}
