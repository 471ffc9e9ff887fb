//go:build !race

package dialect

import (
	"testing"

	"github.com/omniroute/gateway/internal/sse"
)

// TestUsageAllocatesNothing: the meter reads a usage report from every
// answer and usage event of a metered request.
func TestUsageAllocatesNothing(t *testing.T) {
	chunk := &sse.Event{Data: []byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)}
	delta := &sse.Event{Name: []byte("message_delta"), Data: []byte(`{"type":"message_delta","usage":{"output_tokens":15}}`)}
	var u Usage
	if a := testing.AllocsPerRun(200, func() {
		Of(Chat).EventUsage(chunk, &u)
		Of(Messages).EventUsage(delta, &u)
		Of(Chat).BodyUsage(chunk.Data, &u)
	}); a != 0 {
		t.Fatalf("allocated %.1f times; want 0", a)
	}
}
