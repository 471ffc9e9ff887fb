package answer

import (
	"testing"

	"github.com/omniroute/gateway/internal/translate/ir"
)

// TestAnthropicStopWords: each of Anthropic's stop words reads as its
// reason and that reason writes as the same word; an unknown word reads
// as a normal end, and a reason with no word of its own (unset, or past
// the list) writes as end_turn.
func TestAnthropicStopWords(t *testing.T) {
	for word, reason := range map[string]ir.StopReason{
		"end_turn": ir.StopEnd, "max_tokens": ir.StopMaxTokens, "stop_sequence": ir.StopSequence,
		"tool_use": ir.StopToolUse, "refusal": ir.StopRefusal, "pause_turn": ir.StopPause,
		"model_context_window_exceeded": ir.StopContextWindow,
	} {
		if got := stopOf(anthropicStops, []byte(word)); got != reason {
			t.Errorf("%s reads as %d, want %d", word, got, reason)
		}
		if got := anthropicStopName(reason); got != `"`+word+`"` {
			t.Errorf("%d writes as %s, want %q", reason, got, word)
		}
	}
	if got := stopOf(anthropicStops, []byte("nope")); got != ir.StopEnd {
		t.Errorf("an unknown word reads as %d, want a normal end", got)
	}
	for _, r := range []ir.StopReason{ir.StopUnset, ir.StopContextWindow + 1} {
		if got := anthropicStopName(r); got != `"end_turn"` {
			t.Errorf("%d writes as %s, want end_turn", r, got)
		}
	}
}
