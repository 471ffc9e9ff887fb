package translate

import (
	"strconv"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

const ephemeral = `{"type":"ephemeral"}`

// thinkingPlan is what a translated request asks of Anthropic thinking.
type thinkingPlan struct {
	budget    int64 // 0: thinking off
	maxTokens int64
}

// planThinking decides max_tokens and the thinking budget for an Anthropic
// upstream. OpenAI counts reasoning inside the output limit and so does
// Anthropic, so a caller's limit passes unchanged and the budget takes at
// most three quarters of it; without a limit the default limit is added
// on top of the budget. Thinking is left off (and the effort recorded as
// dropped) where Anthropic would refuse it: a forced tool choice, a budget
// below its minimum, or a tool loop whose last assistant turn carries no
// Anthropic thinking block to continue from.
func (t *Translator) planThinking() thinkingPlan {
	r := &t.req
	def := t.opts.MaxTokens
	if def <= 0 {
		def = DefaultMaxTokens
	}
	e := ir.EffortUnset
	if !r.Reasoning.Disabled {
		e = r.Reasoning.Effort
	}
	budget := int64(0)
	switch {
	case r.Reasoning.Disabled:
	case r.Reasoning.Budget > 0:
		budget = r.Reasoning.Budget // an Anthropic caller's own budget
	case r.Reasoning.Adaptive && e == ir.EffortUnset:
		budget = effortBudget[ir.EffortMedium]
	case e >= ir.EffortMinimal && int(e) < len(effortBudget):
		budget = effortBudget[e]
	}
	if budget > 0 && (r.Choice.Mode == ir.ChoiceRequired || r.Choice.Mode == ir.ChoiceTool || !t.thinkingContinues()) {
		t.drop("reasoning_effort")
		budget = 0
	}
	if budget == 0 {
		return thinkingPlan{maxTokens: t.maxTokens(def)}
	}
	if r.MaxTokens < 0 {
		p := thinkingPlan{budget: budget, maxTokens: def + budget}
		if p.budget < minThinkingBudget {
			t.drop("reasoning_effort")
			p.budget = 0
		}
		return p
	}
	p := thinkingPlan{maxTokens: t.maxTokens(def)}
	p.budget = min(budget, p.maxTokens-p.maxTokens/4)
	if p.budget < minThinkingBudget {
		t.drop("reasoning_effort")
		p.budget = 0
	}
	return p
}

// thinkingContinues reports whether the conversation lets thinking be
// turned on: Anthropic wants the last assistant turn of a tool loop to
// start with the thinking block it produced.
func (t *Translator) thinkingContinues() bool {
	r := &t.req
	for mi := len(r.Messages) - 1; mi >= 0; mi-- {
		m := &r.Messages[mi]
		if m.Role != ir.RoleAssistant {
			continue
		}
		parts := r.Parts[m.Parts.Lo:m.Parts.Hi]
		hasCall := false
		for i := range parts {
			if parts[i].Kind == ir.KindToolCall {
				hasCall = true
			}
		}
		if !hasCall {
			return true
		}
		return len(parts) > 0 && parts[0].Kind == ir.KindReasoning && parts[0].Origin == dialect.Messages
	}
	return true
}

// noToolsPlaceholder is the tool list sent to Anthropic for a
// conversation with tool history but no tools.
const noToolsPlaceholder = `[{"name":"omniroute_no_tools","description":"No tools are available in this turn; do not call this.","input_schema":{"type":"object","properties":{}}}]`

// hasToolHistory reports tool calls or results in the conversation.
func (t *Translator) hasToolHistory() bool {
	for i := range t.req.Parts {
		if k := t.req.Parts[i].Kind; k == ir.KindToolCall || k == ir.KindToolResult {
			return true
		}
	}
	return false
}

// cacheSpot is a part that gets an automatic cache breakpoint.
type cacheSpot struct{ msg, part int }

// autoCache picks the cache breakpoints Anthropic needs to cache what
// OpenAI caches by itself: the tools, the system prompt, and the
// conversation up to the last message and up to the user turn before it
// (where the previous request's cache ends). Nothing is added when the
// caller placed cache_control itself.
func (t *Translator) autoCache() (tool, system int, spots [2]cacheSpot) {
	r := &t.req
	tool, system = -1, -1
	spots = [2]cacheSpot{{-1, -1}, {-1, -1}}
	if t.opts.NoAutoCache || t.from == dialect.Messages {
		return
	}
	for i := range r.Tools {
		if r.Tools[i].Cache != nil {
			return
		}
	}
	for i := range r.System {
		if r.System[i].Cache != nil {
			return
		}
	}
	for i := range r.Parts {
		if r.Parts[i].Cache != nil {
			return
		}
	}
	tool = len(r.Tools) - 1
	for i := len(r.System) - 1; i >= 0; i-- {
		if len(r.System[i].Text) > 0 {
			system = i
			break
		}
	}
	n := 0
	for mi := len(r.Messages) - 1; mi >= 0 && n < 2; mi-- {
		m := &r.Messages[mi]
		if n == 1 && m.Role != ir.RoleUser {
			continue
		}
		for pi := m.Parts.Hi - 1; pi >= m.Parts.Lo; pi-- {
			if p := &r.Parts[pi]; p.Kind != ir.KindReasoning && !(p.Kind == ir.KindText && len(p.Text) == 0) {
				spots[n] = cacheSpot{mi, int(pi)}
				n++
				break
			}
		}
	}
	return
}

// writeMessages writes the IR as an Anthropic Messages request: its
// members after the model (Request opens and closes the object).
func (t *Translator) writeMessages(w *ir.Writer) error {
	r := &t.req
	plan := t.planThinking()
	autoTool, autoSys, spots := t.autoCache()
	w.Key("max_tokens")
	w.Int(plan.maxTokens)
	if len(r.System) > 0 {
		w.Key("system")
		w.Arr()
		for i := range r.System {
			p := &r.System[i]
			if len(p.Text) == 0 {
				continue // Anthropic refuses empty text blocks
			}
			w.Obj()
			w.Key("type")
			w.Lit(`"text"`)
			w.Key("text")
			w.RS(p.Text)
			t.cacheField(w, p.Cache, i == autoSys)
			w.End('}')
		}
		w.End(']')
	}
	w.Key("messages")
	w.Arr()
	for mi := range r.Messages {
		m := &r.Messages[mi]
		if err := t.anthropicMessage(w, m, mi, spots); err != nil {
			return err
		}
	}
	w.End(']')
	t.writeTools(w, &anthropicTools, autoTool)
	if len(r.Tools) == 0 && t.hasToolHistory() {
		// Anthropic refuses tool_use and tool_result blocks in a request
		// that defines no tools (an OpenAI caller's closing turn often has
		// none): a tool the model is told not to call, and may not.
		w.Key("tools")
		w.Lit(noToolsPlaceholder)
		w.Key("tool_choice")
		w.Lit(`{"type":"none"}`)
	}
	t.anthropicChoice(w)
	if plan.budget > 0 {
		w.Key("thinking")
		w.Obj()
		w.Key("type")
		w.Lit(`"enabled"`)
		w.Key("budget_tokens")
		w.Int(plan.budget)
		w.End('}')
		// Anthropic refuses sampling settings with thinking on.
		for _, f := range [...]struct {
			name string
			v    []byte
		}{{"temperature", r.Temperature}, {"top_p", r.TopP}, {"top_k", r.TopK}} {
			if f.v != nil {
				t.drop(f.name)
			}
		}
	} else {
		if r.Temperature != nil {
			if v, err := strconv.ParseFloat(string(r.Temperature), 64); err == nil && v > 1 {
				return t.invalid(at("temperature"), "is %s, above 1, the highest temperature of the Anthropic Messages upstream; send 0 to 1", r.Temperature)
			}
		}
		w.RawField("temperature", r.Temperature)
		w.RawField("top_p", r.TopP)
		w.RawField("top_k", r.TopK)
	}
	w.RSListField("stop_sequences", r.Stop)
	if r.Stream {
		w.Key("stream")
		w.Lit("true")
	}
	switch r.Format.Kind {
	case ir.FormatJSONSchema:
		w.Key("output_config")
		w.Obj()
		w.Key("format")
		w.Obj()
		w.Key("type")
		w.Lit(`"json_schema"`)
		w.Key("schema")
		w.Raw(r.Format.Schema)
		w.End('}')
		w.End('}')
	case ir.FormatJSONObject:
		return t.unsupported(at("response_format"), "JSON mode without a schema (json_object; Anthropic needs json_schema)")
	}
	if user := r.User; user != nil || r.SafetyID != nil {
		if user == nil {
			user = r.SafetyID
		}
		w.Key("metadata")
		w.Obj()
		w.Key("user_id")
		w.RS(user)
		w.End('}')
	}
	for _, f := range [...]struct {
		name string
		v    []byte
	}{{"prompt_cache_key", r.PromptCacheKey}, {"metadata", r.Metadata}, {"service_tier", r.ServiceTier}, {"verbosity", r.Verbosity}} {
		if f.v != nil {
			t.drop(f.name)
		}
	}
	return nil
}

func (t *Translator) cacheField(w *ir.Writer, cache []byte, auto bool) {
	switch {
	case cache != nil:
		w.Key("cache_control")
		w.Raw(cache)
	case auto:
		w.Key("cache_control")
		w.Lit(ephemeral)
	}
}

func (t *Translator) anthropicChoice(w *ir.Writer) {
	r := &t.req
	if len(r.Tools) == 0 {
		return // Anthropic refuses a tool_choice without tools
	}
	mode := r.Choice.Mode
	if mode == ir.ChoiceUnset && r.Parallel == ir.False {
		mode = ir.ChoiceAuto
	}
	if mode == ir.ChoiceUnset {
		return
	}
	w.Key("tool_choice")
	w.Obj()
	w.Key("type")
	switch mode {
	case ir.ChoiceAuto:
		w.Lit(`"auto"`)
	case ir.ChoiceNone:
		w.Lit(`"none"`)
	case ir.ChoiceRequired:
		w.Lit(`"any"`)
	case ir.ChoiceTool:
		w.Lit(`"tool"`)
		w.Key("name")
		w.RS(r.Choice.Name)
	}
	if r.Parallel == ir.False && mode != ir.ChoiceNone {
		w.Key("disable_parallel_tool_use")
		w.Lit("true")
	}
	w.End('}')
}

// anthropicMessage writes one turn. Empty text is skipped (Anthropic
// refuses empty text blocks) and so is a turn left with nothing.
func (t *Translator) anthropicMessage(w *ir.Writer, m *ir.Message, mi int, spots [2]cacheSpot) error {
	r := &t.req
	parts := r.Parts[m.Parts.Lo:m.Parts.Hi]
	any := false
	for i := range parts {
		if t.anthropicWritable(&parts[i]) {
			any = true
			break
		}
	}
	if !any {
		return nil
	}
	w.Obj()
	w.Key("role")
	if m.Role == ir.RoleAssistant {
		w.Lit(`"assistant"`)
	} else {
		w.Lit(`"user"`)
	}
	w.Key("content")
	w.Arr()
	for i := range parts {
		p := &parts[i]
		if !t.anthropicWritable(p) {
			continue
		}
		pi := int(m.Parts.Lo) + i
		auto := (spots[0].msg == mi && spots[0].part == pi) || (spots[1].msg == mi && spots[1].part == pi)
		if err := t.anthropicBlockOut(w, p, at("messages").index(mi), auto); err != nil {
			return err
		}
	}
	w.End(']')
	w.End('}')
	return nil
}

// anthropicWritable reports whether p becomes a block: empty text and
// reasoning another dialect made are left out (the latter recorded).
func (t *Translator) anthropicWritable(p *ir.Part) bool {
	switch p.Kind {
	case ir.KindText:
		return len(p.Text) > 0
	case ir.KindReasoning:
		if p.Origin != dialect.Messages {
			t.drop("reasoning")
			return false
		}
	}
	return true
}

func (t *Translator) anthropicBlockOut(w *ir.Writer, p *ir.Part, field loc, auto bool) error {
	r := &t.req
	w.Obj()
	w.Key("type")
	switch p.Kind {
	case ir.KindText:
		w.Lit(`"text"`)
		w.Key("text")
		w.RS(p.Text)
	case ir.KindImage, ir.KindDocument:
		if p.Kind == ir.KindImage {
			w.Lit(`"image"`)
			if p.Detail != nil {
				t.drop("detail")
			}
		} else {
			w.Lit(`"document"`)
		}
		if err := t.anthropicSourceOut(w, p, field); err != nil {
			return err
		}
		if p.Kind == ir.KindDocument {
			w.RSField("title", p.Filename)
		}
	case ir.KindToolCall:
		ir.ToolUseHead(w, p.ID, p.Name)
		if err := t.argsObject(w, p, field.at("tool_calls.arguments")); err != nil {
			return err
		}
	case ir.KindToolResult:
		w.Lit(`"tool_result"`)
		w.Key("tool_use_id")
		ir.ToolID(w, p.ID)
		res := r.ResultParts(p)
		if len(res) == 1 && res[0].Kind == ir.KindText && len(res[0].Text) == 0 {
			res = nil // an empty result: Anthropic takes no content better than ""
		}
		if len(res) > 0 {
			w.Key("content")
			if len(res) == 1 && res[0].Kind == ir.KindText && res[0].Cache == nil {
				w.RS(res[0].Text)
			} else {
				w.Arr()
				for j := range res {
					if !t.anthropicWritable(&res[j]) {
						continue
					}
					if err := t.anthropicBlockOut(w, &res[j], field, false); err != nil {
						return err
					}
				}
				w.End(']')
			}
		}
		if p.IsError {
			w.Key("is_error")
			w.Lit("true")
		}
	case ir.KindReasoning:
		if p.Redacted {
			w.Lit(`"redacted_thinking"`)
			w.Key("data")
			w.RS(p.Sig)
		} else {
			w.Lit(`"thinking"`)
			w.Key("thinking")
			w.RSOrEmpty(p.Text)
			w.Key("signature")
			w.RSOrEmpty(p.Sig)
		}
		w.End('}')
		return nil // thinking blocks take no cache_control
	}
	t.cacheField(w, p.Cache, auto)
	w.End('}')
	return nil
}

func (t *Translator) anthropicSourceOut(w *ir.Writer, p *ir.Part, field loc) error {
	w.Key("source")
	w.Obj()
	w.Key("type")
	switch p.Src {
	case ir.SrcBase64:
		w.Lit(`"base64"`)
		w.Key("media_type")
		w.RS(p.MediaType)
		w.Key("data")
		w.RS(p.Data)
	case ir.SrcURL:
		w.Lit(`"url"`)
		w.Key("url")
		w.RS(p.Data)
	case ir.SrcText:
		w.Lit(`"text"`)
		w.Key("media_type")
		w.Lit(`"text/plain"`)
		w.Key("data")
		w.RS(p.Data)
	case ir.SrcFile:
		if err := t.fileIDCrossing(p, field.at("content")); err != nil {
			return err
		}
		w.Lit(`"file"`)
		w.Key("file_id")
		w.RS(p.Data)
	}
	w.End('}')
	return nil
}
