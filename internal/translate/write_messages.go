package translate

import (
	"strconv"

	"github.com/omniroute/gateway/internal/dialect"
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
	e := EffortUnset
	if !r.Reasoning.Disabled {
		e = r.Reasoning.Effort
	}
	budget := int64(0)
	switch {
	case r.Reasoning.Disabled:
	case r.Reasoning.Budget > 0:
		budget = r.Reasoning.Budget // an Anthropic caller's own budget
	case r.Reasoning.Adaptive && e == EffortUnset:
		budget = effortBudget[EffortMedium]
	case e >= EffortMinimal && int(e) < len(effortBudget):
		budget = effortBudget[e]
	}
	if budget > 0 && (r.Choice.Mode == ChoiceRequired || r.Choice.Mode == ChoiceTool || !t.thinkingContinues()) {
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
		if m.Role != RoleAssistant {
			continue
		}
		parts := r.Parts[m.Parts.Lo:m.Parts.Hi]
		hasCall := false
		for i := range parts {
			if parts[i].Kind == KindToolCall {
				hasCall = true
			}
		}
		if !hasCall {
			return true
		}
		return len(parts) > 0 && parts[0].Kind == KindReasoning && parts[0].Origin == dialect.Messages
	}
	return true
}

// noToolsPlaceholder is the tool list sent to Anthropic for a
// conversation with tool history but no tools.
const noToolsPlaceholder = `[{"name":"omniroute_no_tools","description":"No tools are available in this turn; do not call this.","input_schema":{"type":"object","properties":{}}}]`

// hasToolHistory reports tool calls or results in the conversation.
func (t *Translator) hasToolHistory() bool {
	for i := range t.req.Parts {
		if k := t.req.Parts[i].Kind; k == KindToolCall || k == KindToolResult {
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
		if n == 1 && m.Role != RoleUser {
			continue
		}
		for pi := m.Parts.Hi - 1; pi >= m.Parts.Lo; pi-- {
			if p := &r.Parts[pi]; p.Kind != KindReasoning && !(p.Kind == KindText && len(p.Text) == 0) {
				spots[n] = cacheSpot{mi, int(pi)}
				n++
				break
			}
		}
	}
	return
}

// writeMessages writes the IR as an Anthropic Messages request.
func (t *Translator) writeMessages(dst []byte) ([]byte, error) {
	r := &t.req
	plan := t.planThinking()
	autoTool, autoSys, spots := t.autoCache()
	w := writer{b: dst}
	w.obj()
	w.key("model")
	w.str(t.opts.Model)
	w.key("max_tokens")
	w.int(plan.maxTokens)
	if len(r.System) > 0 {
		w.key("system")
		w.arr()
		for i := range r.System {
			p := &r.System[i]
			if len(p.Text) == 0 {
				continue // Anthropic refuses empty text blocks
			}
			w.obj()
			w.key("type")
			w.lit(`"text"`)
			w.key("text")
			w.rs(p.Text)
			t.cacheField(&w, p.Cache, i == autoSys)
			w.end('}')
		}
		w.end(']')
	}
	w.key("messages")
	w.arr()
	for mi := range r.Messages {
		m := &r.Messages[mi]
		if err := t.anthropicMessage(&w, m, mi, spots); err != nil {
			return dst, err
		}
	}
	w.end(']')
	if len(r.Tools) > 0 {
		w.key("tools")
		w.arr()
		for i := range r.Tools {
			tl := &r.Tools[i]
			w.obj()
			w.key("name")
			w.rs(tl.Name)
			w.rsField("description", tl.Description)
			w.key("input_schema")
			w.raw(toolSchema(tl))
			if tl.Strict != nil && tl.Kind == ToolFunction {
				w.rawField("strict", tl.Strict)
			}
			t.cacheField(&w, tl.Cache, i == autoTool)
			w.end('}')
		}
		w.end(']')
	}
	if len(r.Tools) == 0 && t.hasToolHistory() {
		// Anthropic refuses tool_use and tool_result blocks in a request
		// that defines no tools (an OpenAI caller's closing turn often has
		// none): a tool the model is told not to call, and may not.
		w.key("tools")
		w.lit(noToolsPlaceholder)
		w.key("tool_choice")
		w.lit(`{"type":"none"}`)
	}
	t.anthropicChoice(&w)
	if plan.budget > 0 {
		w.key("thinking")
		w.obj()
		w.key("type")
		w.lit(`"enabled"`)
		w.key("budget_tokens")
		w.int(plan.budget)
		w.end('}')
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
				return dst, t.invalid(at("temperature"), "is %s, above 1, the highest temperature of the Anthropic Messages upstream; send 0 to 1", r.Temperature)
			}
		}
		w.rawField("temperature", r.Temperature)
		w.rawField("top_p", r.TopP)
		w.rawField("top_k", r.TopK)
	}
	w.rsListField("stop_sequences", r.Stop)
	if r.Stream {
		w.key("stream")
		w.lit("true")
	}
	switch r.Format.Kind {
	case FormatJSONSchema:
		w.key("output_config")
		w.obj()
		w.key("format")
		w.obj()
		w.key("type")
		w.lit(`"json_schema"`)
		w.key("schema")
		w.raw(r.Format.Schema)
		w.end('}')
		w.end('}')
	case FormatJSONObject:
		return dst, t.unsupported(at("response_format"), "JSON mode without a schema (json_object; Anthropic needs json_schema)")
	}
	if user := r.User; user != nil || r.SafetyID != nil {
		if user == nil {
			user = r.SafetyID
		}
		w.key("metadata")
		w.obj()
		w.key("user_id")
		w.rs(user)
		w.end('}')
	}
	for _, f := range [...]struct {
		name string
		v    []byte
	}{{"prompt_cache_key", r.PromptCacheKey}, {"metadata", r.Metadata}, {"service_tier", r.ServiceTier}, {"verbosity", r.Verbosity}} {
		if f.v != nil {
			t.drop(f.name)
		}
	}
	w.end('}')
	return w.b, nil
}

func (t *Translator) cacheField(w *writer, cache []byte, auto bool) {
	switch {
	case cache != nil:
		w.key("cache_control")
		w.raw(cache)
	case auto:
		w.key("cache_control")
		w.lit(ephemeral)
	}
}

func (t *Translator) anthropicChoice(w *writer) {
	r := &t.req
	if len(r.Tools) == 0 {
		return // Anthropic refuses a tool_choice without tools
	}
	mode := r.Choice.Mode
	if mode == ChoiceUnset && r.Parallel == False {
		mode = ChoiceAuto
	}
	if mode == ChoiceUnset {
		return
	}
	w.key("tool_choice")
	w.obj()
	w.key("type")
	switch mode {
	case ChoiceAuto:
		w.lit(`"auto"`)
	case ChoiceNone:
		w.lit(`"none"`)
	case ChoiceRequired:
		w.lit(`"any"`)
	case ChoiceTool:
		w.lit(`"tool"`)
		w.key("name")
		w.rs(r.Choice.Name)
	}
	if r.Parallel == False && mode != ChoiceNone {
		w.key("disable_parallel_tool_use")
		w.lit("true")
	}
	w.end('}')
}

// anthropicMessage writes one turn. Empty text is skipped (Anthropic
// refuses empty text blocks) and so is a turn left with nothing.
func (t *Translator) anthropicMessage(w *writer, m *Message, mi int, spots [2]cacheSpot) error {
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
	w.obj()
	w.key("role")
	if m.Role == RoleAssistant {
		w.lit(`"assistant"`)
	} else {
		w.lit(`"user"`)
	}
	w.key("content")
	w.arr()
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
	w.end(']')
	w.end('}')
	return nil
}

// anthropicWritable reports whether p becomes a block: empty text and
// reasoning another dialect made are left out (the latter recorded).
func (t *Translator) anthropicWritable(p *Part) bool {
	switch p.Kind {
	case KindText:
		return len(p.Text) > 0
	case KindReasoning:
		if p.Origin != dialect.Messages {
			t.drop("reasoning")
			return false
		}
	}
	return true
}

func (t *Translator) anthropicBlockOut(w *writer, p *Part, field loc, auto bool) error {
	r := &t.req
	w.obj()
	w.key("type")
	switch p.Kind {
	case KindText:
		w.lit(`"text"`)
		w.key("text")
		w.rs(p.Text)
	case KindImage, KindDocument:
		if p.Kind == KindImage {
			w.lit(`"image"`)
			if p.Detail != nil {
				t.drop("detail")
			}
		} else {
			w.lit(`"document"`)
		}
		if err := t.anthropicSourceOut(w, p, field); err != nil {
			return err
		}
		if p.Kind == KindDocument {
			w.rsField("title", p.Filename)
		}
	case KindToolCall:
		w.lit(`"tool_use"`)
		w.key("id")
		toolID(w, p.ID)
		w.key("name")
		w.rs(p.Name)
		w.key("input")
		if err := t.argsObject(w, p, field.at("tool_calls.arguments")); err != nil {
			return err
		}
	case KindToolResult:
		w.lit(`"tool_result"`)
		w.key("tool_use_id")
		toolID(w, p.ID)
		res := r.ResultParts(p)
		if len(res) == 1 && res[0].Kind == KindText && len(res[0].Text) == 0 {
			res = nil // an empty result: Anthropic takes no content better than ""
		}
		if len(res) > 0 {
			w.key("content")
			if len(res) == 1 && res[0].Kind == KindText && res[0].Cache == nil {
				w.rs(res[0].Text)
			} else {
				w.arr()
				for j := range res {
					if !t.anthropicWritable(&res[j]) {
						continue
					}
					if err := t.anthropicBlockOut(w, &res[j], field, false); err != nil {
						return err
					}
				}
				w.end(']')
			}
		}
		if p.IsError {
			w.key("is_error")
			w.lit("true")
		}
	case KindReasoning:
		if p.Redacted {
			w.lit(`"redacted_thinking"`)
			w.key("data")
			w.rs(p.Sig)
		} else {
			w.lit(`"thinking"`)
			w.key("thinking")
			w.rsOrEmpty(p.Text)
			w.key("signature")
			w.rsOrEmpty(p.Sig)
		}
		w.end('}')
		return nil // thinking blocks take no cache_control
	}
	t.cacheField(w, p.Cache, auto)
	w.end('}')
	return nil
}

func (t *Translator) anthropicSourceOut(w *writer, p *Part, field loc) error {
	w.key("source")
	w.obj()
	w.key("type")
	switch p.Src {
	case SrcBase64:
		w.lit(`"base64"`)
		w.key("media_type")
		w.rs(p.MediaType)
		w.key("data")
		w.rs(p.Data)
	case SrcURL:
		w.lit(`"url"`)
		w.key("url")
		w.rs(p.Data)
	case SrcText:
		w.lit(`"text"`)
		w.key("media_type")
		w.lit(`"text/plain"`)
		w.key("data")
		w.rs(p.Data)
	case SrcFile:
		if err := t.fileIDCrossing(p, field.at("content")); err != nil {
			return err
		}
		w.lit(`"file"`)
		w.key("file_id")
		w.rs(p.Data)
	}
	w.end('}')
	return nil
}

// toolID writes a tool call id with every byte Anthropic's id pattern
// (^[a-zA-Z0-9_-]+$) refuses replaced by '_'. Some OpenAI-compatible
// servers make ids such as "functions.get_weather:0"; the same mapping on
// the call and its result keeps them paired.
func toolID(w *writer, id []byte) {
	w.sep()
	w.b = append(w.b, '"')
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			c = '_'
		}
		w.b = append(w.b, c)
	}
	if len(id) == 0 {
		w.b = append(w.b, '_')
	}
	w.b = append(w.b, '"')
	w.comma = true
}
