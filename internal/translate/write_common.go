package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// Helpers shared by the request writers.

// Reasoning effort ⇄ Anthropic thinking budget. A budget maps to the
// nearest of low, medium and high (the levels every OpenAI-compatible
// reasoning model takes); an effort maps to the budget below.
var effortBudget = [...]int64{
	EffortMinimal: 1024,
	EffortLow:     4096,
	EffortMedium:  10240,
	EffortHigh:    24576,
	EffortXHigh:   32768,
	EffortMax:     65536,
}

func effortForBudget(b int64) Effort {
	switch {
	case b < 6144:
		return EffortLow
	case b < 20480:
		return EffortMedium
	}
	return EffortHigh
}

// minThinkingBudget is Anthropic's smallest budget_tokens.
const minThinkingBudget = 1024

// openAIEffort is the reasoning effort to send an OpenAI-family upstream.
// Between chat and responses the caller's value passes unchanged; from
// Anthropic a budget or an output_config effort maps onto low..high and
// adaptive thinking without an effort is medium.
func (t *Translator) openAIEffort() Effort {
	rz := &t.req.Reasoning
	if rz.Disabled {
		return EffortUnset
	}
	if dialect.Of(t.from).Family == dialect.OpenAI {
		return rz.Effort
	}
	e := rz.Effort
	if rz.Budget > 0 {
		e = effortForBudget(rz.Budget)
	} else if rz.Adaptive && e == EffortUnset {
		e = EffortMedium
	}
	if e > EffortHigh {
		e = EffortHigh
	}
	return e
}

// mediaURL writes an OpenAI URL value for an image or document: the URL,
// or a data URL for base64 data.
func mediaURL(w *writer, p *Part) {
	if p.Src != SrcBase64 {
		w.rs(p.Data)
		return
	}
	w.sep()
	w.b = append(w.b, `"data:`...)
	w.b = append(w.b, p.MediaType...)
	w.b = append(w.b, ";base64,"...)
	w.b = append(w.b, p.Data...)
	w.b = append(w.b, '"')
	w.comma = true
}

// fileIDCrossing refuses a provider file id sent to another vendor, whose
// file store does not have it.
func (t *Translator) fileIDCrossing(p *Part, field loc) error {
	if p.Src == SrcFile && !dialect.SameFamily(t.from, t.to) {
		return t.unsupported(field, "a file_id of the caller's provider")
	}
	return nil
}

// customArgs is the JSON text of a custom tool call's free-form input as
// the arguments of the function the upstream sees: {"input": <text>}.
func (t *Translator) customArgs(p *Part) []byte {
	t.tmp = append(t.tmp[:0], `{"input":"`...)
	t.tmp = append(t.tmp, p.Args...)
	t.tmp = append(t.tmp, `"}`...)
	return t.tmp
}

// customSchema is the parameters schema of a custom tool seen as a
// function.
const customSchema = `{"type":"object","properties":{"input":{"type":"string","description":"The tool's free-form input."}},"required":["input"],"additionalProperties":false}`

// emptySchema is the schema of a tool defined without parameters.
const emptySchema = `{"type":"object","properties":{}}`

// argsString writes a tool call's arguments as an OpenAI arguments string.
func (t *Translator) argsString(w *writer, p *Part) {
	switch {
	case p.Custom:
		w.strBytes(t.customArgs(p))
	case p.ArgsEscaped:
		w.rs(p.Args)
	default:
		w.strBytes(p.Args)
	}
}

// argsObject writes a tool call's arguments as an Anthropic input object.
// OpenAI arguments are a string the model wrote; one that is not a JSON
// object is refused rather than guessed at.
func (t *Translator) argsObject(w *writer, p *Part, field loc) error {
	switch {
	case p.Custom:
		w.raw(t.customArgs(p))
		return nil
	case !p.ArgsEscaped:
		w.raw(p.Args)
		return nil
	}
	var ok bool
	t.tmp, ok = unescapeRS(t.tmp[:0], p.Args)
	if !ok {
		return t.invalid(field, "is not a valid string")
	}
	text := bytes.TrimSpace(t.tmp)
	if len(text) == 0 {
		w.lit("{}")
		return nil
	}
	if !isObject(text) {
		return t.invalid(field, "must be a JSON object to reach the %s upstream (it is the tool input)", t.to)
	}
	w.raw(text)
	return nil
}

// isObject reports whether text is exactly one valid JSON object.
func isObject(text []byte) bool {
	var c jsonscan.Cursor
	c.Reset(text)
	if c.Peek() != '{' {
		return false
	}
	c.Skip()
	return c.End() == nil
}

// toolSchema is the parameters schema to write for tool tl.
func toolSchema(tl *Tool) []byte {
	switch {
	case tl.Kind == ToolCustom:
		return []byte(customSchema)
	case tl.Schema == nil:
		return []byte(emptySchema)
	}
	return tl.Schema
}

// textOnly reports whether parts are all text.
func textOnly(parts []Part) bool {
	for i := range parts {
		if parts[i].Kind != KindText {
			return false
		}
	}
	return true
}

// joinText writes the text of parts as one string, blank lines between.
func joinText(w *writer, parts []Part) {
	w.sep()
	w.b = append(w.b, '"')
	n := 0
	for i := range parts {
		if parts[i].Kind != KindText {
			continue
		}
		if n > 0 {
			w.b = append(w.b, `\n\n`...)
		}
		w.b = append(w.b, parts[i].Text...)
		n++
	}
	w.b = append(w.b, '"')
	w.comma = true
}

// dropCache records cache_control the upstream cannot take.
func (t *Translator) dropCache(p *Part) {
	if p.Cache != nil {
		t.drop("cache_control")
	}
}

// BudgetForEffort is the Anthropic thinking budget of an effort level
// (a dialect.Efforts name), 0 for none or an unknown name: the scale the
// translator maps efforts by, for internal/fit's mapping between a
// model's reasoning controls.
func BudgetForEffort(name string) int64 {
	e := parseEffort([]byte(name))
	if e < EffortMinimal || int(e) >= len(effortBudget) {
		return 0
	}
	return effortBudget[e]
}

// EffortForBudget is the effort level (a dialect.Efforts name) of an
// Anthropic thinking budget, on the translator's scale.
func EffortForBudget(b int64) string { return effortForBudget(b).String() }
