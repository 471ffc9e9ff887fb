package fit

import (
	"slices"
	"strings"

	"github.com/omniroute/gateway/internal/dialect"
)

// A field the fitter names in the upstream's dialect has, in a
// translated call, another name in the caller's: the output limit, the
// reasoning control and verbosity are spelled differently by each
// dialect. roles groups those spellings.
var roles = []struct {
	names  []string
	caller [4]string // by dialect.ID: chat, messages, responses
}{
	{[]string{"max_tokens", "max_completion_tokens", "max_output_tokens"},
		[4]string{dialect.Chat: "max_tokens", dialect.Messages: "max_tokens", dialect.Responses: "max_output_tokens"}},
	{[]string{"reasoning_effort", "reasoning", "reasoning.effort", "thinking", "thinking.budget_tokens", "output_config.effort"},
		[4]string{dialect.Chat: "reasoning_effort", dialect.Messages: "thinking", dialect.Responses: "reasoning.effort"}},
	{[]string{"verbosity", "text.verbosity"},
		[4]string{dialect.Chat: "verbosity", dialect.Responses: "text.verbosity"}},
	// Only Responses callers send include; a translation to Responses
	// adds it for the others.
	{[]string{"include"}, [4]string{dialect.Responses: "include"}},
}

// CallerName is the caller's name of field, which the fitter named in
// the upstream's dialect up: itself when the call is not translated or
// the field has the same name in both, "" when the caller's dialect has
// no such field (the translation added it: its change is not the
// caller's business).
func CallerName(field string, up, caller dialect.ID) string {
	if up == caller {
		return field
	}
	base, _, _ := strings.Cut(field, "[")
	for _, r := range roles {
		if !slices.Contains(r.names, base) || int(caller) >= len(r.caller) {
			continue
		}
		switch name := r.caller[caller]; name {
		case "":
			return ""
		case base:
			return field // the same name, with its [item]
		default:
			return name
		}
	}
	return field
}
