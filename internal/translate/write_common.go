package translate

import (
	"bytes"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// Helpers shared by the request writers.

// Reasoning effort ⇄ Anthropic thinking budget. A budget maps to the
// nearest of low, medium and high (the levels every OpenAI-compatible
// reasoning model takes); an effort maps to the budget below.
var effortBudget = [...]int64{
	ir.EffortMinimal: 1024,
	ir.EffortLow:     4096,
	ir.EffortMedium:  10240,
	ir.EffortHigh:    24576,
	ir.EffortXHigh:   32768,
	ir.EffortMax:     65536,
}

func effortForBudget(b int64) ir.Effort {
	switch {
	case b < 6144:
		return ir.EffortLow
	case b < 20480:
		return ir.EffortMedium
	}
	return ir.EffortHigh
}

// minThinkingBudget is Anthropic's smallest budget_tokens.
const minThinkingBudget = 1024

// openAIEffort is the reasoning effort to send an OpenAI-family upstream.
// Between chat and responses the caller's value passes unchanged; from
// Anthropic a budget or an output_config effort maps onto low..high and
// adaptive thinking without an effort is medium.
func (t *Translator) openAIEffort() ir.Effort {
	rz := &t.req.Reasoning
	if rz.Disabled {
		return ir.EffortUnset
	}
	if dialect.Of(t.from).Family == dialect.OpenAI {
		return rz.Effort
	}
	e := rz.Effort
	if rz.Budget > 0 {
		e = effortForBudget(rz.Budget)
	} else if rz.Adaptive && e == ir.EffortUnset {
		e = ir.EffortMedium
	}
	if e > ir.EffortHigh {
		e = ir.EffortHigh
	}
	return e
}

// mediaURL writes an OpenAI URL value for an image or document: the URL,
// or a data URL for base64 data.
func mediaURL(w *ir.Writer, p *ir.Part) {
	if p.Src != ir.SrcBase64 {
		w.RS(p.Data)
		return
	}
	w.Sep()
	w.B = append(w.B, `"data:`...)
	w.B = append(w.B, p.MediaType...)
	w.B = append(w.B, ";base64,"...)
	w.B = append(w.B, p.Data...)
	w.B = append(w.B, '"')
	w.Comma = true
}

// fileIDCrossing refuses a provider file id sent to another vendor, whose
// file store does not have it.
func (t *Translator) fileIDCrossing(p *ir.Part, field loc) error {
	if p.Src == ir.SrcFile && !dialect.SameFamily(t.from, t.to) {
		return t.unsupported(field, "a file_id of the caller's provider")
	}
	return nil
}

// customSchema is the parameters schema of a custom tool seen as a
// function.
const customSchema = `{"type":"object","properties":{"input":{"type":"string","description":"The tool's free-form input."}},"required":["input"],"additionalProperties":false}`

// emptySchema is the schema of a tool defined without parameters.
const emptySchema = `{"type":"object","properties":{}}`

// customArgs is the JSON text of a custom tool call's free-form input as
// the arguments of the function the upstream sees (see ir.CustomArgs).
func (t *Translator) customArgs(p *ir.Part) []byte {
	t.tmp = ir.CustomArgs(t.tmp[:0], p.Args)
	return t.tmp
}

// argsString writes a tool call's arguments as an OpenAI arguments string.
func (t *Translator) argsString(w *ir.Writer, p *ir.Part) { t.tmp = ir.ArgsString(w, p, t.tmp) }

// argsObject writes a tool call's arguments as an Anthropic input object.
// OpenAI arguments are a string the model wrote; one that is not a JSON
// object is refused rather than guessed at.
func (t *Translator) argsObject(w *ir.Writer, p *ir.Part, field loc) error {
	switch {
	case p.Custom:
		w.Raw(t.customArgs(p))
		return nil
	case !p.ArgsEscaped:
		w.Raw(p.Args)
		return nil
	}
	var ok bool
	t.tmp, ok = ir.UnescapeRS(t.tmp[:0], p.Args)
	if !ok {
		return t.invalid(field, "is not a valid string")
	}
	text := bytes.TrimSpace(t.tmp)
	if len(text) == 0 {
		w.Lit("{}")
		return nil
	}
	if !ir.IsObject(text) {
		return t.invalid(field, "must be a JSON object to reach the %s upstream (it is the tool input)", t.to)
	}
	w.Raw(text)
	return nil
}

// toolSchema is the parameters schema to write for tool tl.
func toolSchema(tl *ir.Tool) []byte {
	switch {
	case tl.Kind == ir.ToolCustom:
		return []byte(customSchema)
	case tl.Schema == nil:
		return []byte(emptySchema)
	}
	return tl.Schema
}

// textOnly reports whether parts are all text.
func textOnly(parts []ir.Part) bool {
	for i := range parts {
		if parts[i].Kind != ir.KindText {
			return false
		}
	}
	return true
}

// dropCache records cache_control the upstream cannot take.
func (t *Translator) dropCache(p *ir.Part) {
	if p.Cache != nil {
		t.drop("cache_control")
	}
}

// BudgetForEffort is the Anthropic thinking budget of an effort level
// (a dialect.Efforts name), 0 for none or an unknown name: the scale the
// translator maps efforts by, for internal/fit's mapping between a
// model's reasoning controls.
func BudgetForEffort(name string) int64 {
	e := ir.ParseEffort([]byte(name))
	if e < ir.EffortMinimal || int(e) >= len(effortBudget) {
		return 0
	}
	return effortBudget[e]
}

// EffortForBudget is the effort level (a dialect.Efforts name) of an
// Anthropic thinking budget, on the translator's scale.
func EffortForBudget(b int64) string { return effortForBudget(b).String() }

// toolShape is how a dialect writes a tool definition.
type toolShape struct {
	wrap      string // the object the definition sits in (chat's "function"); "": none
	typed     bool   // a "type" member: "function", or "custom" for a custom tool kept as one
	customs   bool   // custom tools kept as custom tools (Responses); else functions taking {"input"}
	schemaKey string // the parameters schema's member
	// strictDefault is written when the caller set no strict ("": none).
	// Responses makes functions strict unless told otherwise, and strict
	// mode refuses most schemas written for other APIs.
	strictDefault string
	cache         bool // cache_control kept (Anthropic); else dropped
	parallel      bool // parallel_tool_calls a member of the request (OpenAI)
}

var (
	chatTools      = toolShape{wrap: "function", typed: true, schemaKey: "parameters", parallel: true}
	responsesTools = toolShape{typed: true, customs: true, schemaKey: "parameters", strictDefault: "false", parallel: true}
	anthropicTools = toolShape{schemaKey: "input_schema", cache: true}
)

// writeTools writes the request's tools as sh says (auto: the index of the
// tool that gets an automatic cache breakpoint, -1 none), then
// parallel_tool_calls where the dialect has it as a member (Anthropic's
// is in tool_choice).
func (t *Translator) writeTools(w *ir.Writer, sh *toolShape, auto int) {
	r := &t.req
	if len(r.Tools) == 0 {
		return
	}
	w.Key("tools")
	w.Arr()
	for i := range r.Tools {
		tl := &r.Tools[i]
		custom := sh.customs && tl.Kind == ir.ToolCustom
		w.Obj()
		if sh.typed {
			w.Key("type")
			if custom {
				w.Lit(`"custom"`)
			} else {
				w.Lit(`"function"`)
			}
		}
		if sh.wrap != "" {
			w.Key(sh.wrap)
			w.Obj()
		}
		w.Key("name")
		w.RS(tl.Name)
		w.RSField("description", tl.Description)
		if !custom {
			w.Key(sh.schemaKey)
			w.Raw(toolSchema(tl))
			switch {
			case tl.Kind != ir.ToolFunction:
			case tl.Strict != nil:
				w.Key("strict")
				w.Raw(tl.Strict)
			case sh.strictDefault != "":
				w.Key("strict")
				w.Lit(sh.strictDefault)
			}
		}
		if sh.wrap != "" {
			w.End('}')
		}
		if sh.cache {
			t.cacheField(w, tl.Cache, i == auto)
		} else if tl.Cache != nil {
			t.drop("cache_control")
		}
		w.End('}')
	}
	w.End(']')
	if r.Parallel != ir.Unset && sh.parallel {
		w.Key("parallel_tool_calls")
		w.Bool(r.Parallel == ir.True)
	}
}

// openAIFormat writes the output format as member key: chat's
// response_format, whose schema sits in an object (wrap), or Responses'
// text.format, which holds it itself.
func (t *Translator) openAIFormat(w *ir.Writer, key, wrap string) {
	f := &t.req.Format
	switch f.Kind {
	case ir.FormatText:
		w.Key(key)
		w.Lit(`{"type":"text"}`)
	case ir.FormatJSONObject:
		w.Key(key)
		w.Lit(`{"type":"json_object"}`)
	case ir.FormatJSONSchema:
		w.Key(key)
		w.Obj()
		w.Key("type")
		w.Lit(`"json_schema"`)
		if wrap != "" {
			w.Key(wrap)
			w.Obj()
		}
		w.Key("name")
		if f.Name != nil {
			w.RS(f.Name)
		} else {
			w.Lit(`"response"`)
		}
		w.RSField("description", f.Description)
		w.Key("schema")
		w.Raw(f.Schema)
		w.RawField("strict", f.Strict)
		if wrap != "" {
			w.End('}')
		}
		w.End('}')
	}
}
