package mockprovider

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/modelinfo"
)

// Strict mode (Behavior.Strict, or --strict for the default behaviour)
// makes the mock refuse a request the real provider of the requested
// model refuses, with that provider's status, error shape and wording:
// a field its API does not document (OpenAI, Anthropic), an output limit
// above the model's or under the other name (max_tokens to a reasoning
// model), a reasoning control the model does not take or an effort it
// does not have, a field the model refuses, sampling settings with
// reasoning on, a thinking budget outside Anthropic's bounds, a prompt
// above the context window. What a model takes is read from the model
// table (internal/modelinfo); the rules are written here from the
// providers' documented errors, apart from the gateway's fitting
// (internal/fit), so an end-to-end test holds the two against each
// other. A model the table does not know is not checked.

// strictCheck validates body for endpoint ep; it returns the provider's
// error, or ok.
func strictCheck(ep endpoint, body []byte, model string) (errInfo, bool) {
	info := modelinfo.Shipped().Lookup(model)
	if info.Permissive() {
		return errInfo{}, true
	}
	var r jsonscan.Request
	if err := jsonscan.ScanRequest(body, &r); err != nil {
		return errInfo{status: 400, msg: err.Error()}, false
	}
	s := strict{info: &info, body: body, r: &r}
	if w := info.ContextWindow; w > 0 {
		if in := int64(len(body)+3) / 4; in > w {
			return s.openAI(400, "context_length_exceeded", "messages", "This model's maximum context length is "+itoa(w)+
				" tokens. However, your messages resulted in "+itoa(in)+" tokens. Please reduce the length of the messages."), false
		}
	}
	switch ep {
	case endpointChat:
		return s.chat()
	case endpointResponses:
		return s.responses()
	case endpointMessages:
		return s.messages()
	}
	return errInfo{}, true
}

type strict struct {
	info *modelinfo.Info
	body []byte
	r    *jsonscan.Request
}

func (s *strict) get(key string) []byte {
	for _, m := range s.r.Members {
		if string(m.Key) == key {
			return s.body[m.ValueStart:m.End]
		}
	}
	return nil
}

func (s *strict) openAI(status int, code, param, msg string) errInfo {
	return errInfo{status: status, code: code, param: param, msg: msg}
}

func (s *strict) anthropic(msg string) errInfo { return errInfo{status: 400, msg: msg} }

func unquote(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' {
		return string(v[1 : len(v)-1])
	}
	return string(v)
}

func numberOf(v []byte) (float64, bool) {
	n, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
	return n, err == nil
}

// toggleField reports the model's own reasoning switch, which its API
// takes beside the documented fields.
func (s *strict) toggleField(k string) bool {
	return s.info.Reasoning.Kind == config.ReasoningToggle && s.info.Reasoning.Toggle == k
}

// unknownField returns the first top-level field the dialect's API does
// not document, when the model's provider validates them.
func (s *strict) unknownField(d dialect.ID) string {
	if !s.info.KnownParamsOnly {
		return ""
	}
	spec := dialect.Of(d)
	for _, m := range s.r.Members {
		if !spec.Accepts(m.Key) && !s.toggleField(string(m.Key)) {
			return string(m.Key)
		}
	}
	return ""
}

// reasoningOn reports whether an OpenAI-family request reasons, given its
// effort ("" when it names none).
func (s *strict) reasoningOn(effort string) bool {
	r := &s.info.Reasoning
	switch r.Kind {
	case config.ReasoningAlways:
		return true
	case config.ReasoningEffort:
		if effort == "" {
			effort = r.Default
		}
		return effort != "none"
	}
	return false
}

func effortsList(efforts []string) string {
	q := make([]string, len(efforts))
	for i, e := range efforts {
		q[i] = "'" + e + "'"
	}
	return strings.Join(q, ", ")
}

// effortError checks an OpenAI effort for the model: Unrecognized on a
// model that takes none (as OpenAI answers gpt-4o), unsupported_value
// for a level it lacks.
func (s *strict) effortError(field, effort string, responses bool) (errInfo, bool) {
	r := &s.info.Reasoning
	switch r.Kind {
	case config.ReasoningNone, config.ReasoningToggle:
		if responses {
			return s.openAI(400, "unsupported_parameter", field, "Unsupported parameter: '"+field+"' is not supported with this model."), false
		}
		return s.openAI(400, "", "", "Unrecognized request argument supplied: "+field), false
	case config.ReasoningAlways:
		if len(r.Efforts) == 0 {
			return s.openAI(400, "unsupported_parameter", field, "Unsupported parameter: '"+field+"' is not supported with this model."), false
		}
		fallthrough
	case config.ReasoningEffort:
		if !slices.Contains(r.Efforts, effort) {
			return s.openAI(400, "unsupported_value", field, "Unsupported value: '"+field+"' does not support '"+effort+
				"' with this model. Supported values are: "+effortsList(r.Efforts)+"."), false
		}
	}
	return errInfo{}, true
}

// samplingError refuses the sampling fields a reasoning model takes only
// with effort none (temperature other than 1: unsupported_value; the rest
// unsupported_parameter).
func (s *strict) samplingError(effort string) (errInfo, bool) {
	if !s.info.SamplingNeedsNoReasoning || !s.reasoningOn(effort) {
		return errInfo{}, true
	}
	for _, f := range []string{"temperature", "top_p", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias"} {
		v := s.get(f)
		if v == nil {
			continue
		}
		if f == "temperature" {
			if n, ok := numberOf(v); ok && n == 1 {
				continue
			}
			return s.openAI(400, "unsupported_value", f, "Unsupported value: 'temperature' does not support "+string(bytes.TrimSpace(v))+
				" with this model. Only the default (1) value is supported."), false
		}
		return s.openAI(400, "unsupported_parameter", f, "Unsupported parameter: '"+f+"' is not supported with this model."), false
	}
	return errInfo{}, true
}

func (s *strict) refused() string {
	for _, m := range s.r.Members {
		if s.info.RefusesParam(string(m.Key)) {
			return string(m.Key)
		}
	}
	return ""
}

func (s *strict) chat() (errInfo, bool) {
	if f := s.unknownField(dialect.Chat); f != "" {
		return s.openAI(400, "", "", "Unrecognized request argument supplied: "+f), false
	}
	mt, mct := s.get("max_tokens"), s.get("max_completion_tokens")
	switch s.info.OutputParam {
	case config.OutputMaxCompletionTokens:
		if mt != nil {
			return s.openAI(400, "unsupported_parameter", "max_tokens",
				"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."), false
		}
	case config.OutputMaxTokens:
		if mct != nil {
			return s.openAI(400, "", "", "Unrecognized request argument supplied: max_completion_tokens"), false
		}
	}
	for _, f := range []struct {
		name string
		v    []byte
	}{{"max_tokens", mt}, {"max_completion_tokens", mct}} {
		if n, ok := numberOf(f.v); ok && s.info.MaxOutput > 0 && int64(n) > s.info.MaxOutput {
			return s.openAI(400, "", f.name, f.name+" is too large: "+itoa(int64(n))+". This model supports at most "+
				itoa(s.info.MaxOutput)+" completion tokens, whereas you provided "+itoa(int64(n))+"."), false
		}
	}
	effort := ""
	if v := s.get("reasoning_effort"); v != nil {
		effort = unquote(v)
		if e, ok := s.effortError("reasoning_effort", effort, false); !ok {
			return e, false
		}
	}
	if f := s.refused(); f != "" {
		return s.openAI(400, "unsupported_parameter", f, "Unsupported parameter: '"+f+"' is not supported with this model."), false
	}
	return s.samplingError(effort)
}

func (s *strict) responses() (errInfo, bool) {
	if f := s.unknownField(dialect.Responses); f != "" {
		return s.openAI(400, "unknown_parameter", f, "Unknown parameter: '"+f+"'."), false
	}
	if n, ok := numberOf(s.get("max_output_tokens")); ok && s.info.MaxOutput > 0 && int64(n) > s.info.MaxOutput {
		return s.openAI(400, "integer_above_max_value", "max_output_tokens", "Invalid 'max_output_tokens': integer above maximum value. Expected a value <= "+
			itoa(s.info.MaxOutput)+", but got "+itoa(int64(n))+" instead."), false
	}
	effort := ""
	if rv := s.get("reasoning"); rv != nil && string(bytes.TrimSpace(rv)) != "null" {
		if v := jsonscan.Get(rv, "effort"); v != nil {
			effort = unquote(v)
			if e, ok := s.effortError("reasoning.effort", effort, true); !ok {
				return e, false
			}
		}
		if k := s.info.Reasoning.Kind; (k == config.ReasoningNone || k == config.ReasoningToggle) && jsonscan.Get(rv, "summary") != nil {
			return s.openAI(400, "unsupported_parameter", "reasoning.summary", "Unsupported parameter: 'reasoning.summary' is not supported with this model."), false
		}
	}
	if iv := s.get("include"); iv != nil && s.info.Reasoning.Kind == config.ReasoningNone && bytes.Contains(iv, []byte(`"reasoning.encrypted_content"`)) {
		return s.openAI(400, "", "include", "Encrypted content is not supported with this model."), false
	}
	if tv := s.get("text"); tv != nil && s.info.RefusesParam("verbosity") && jsonscan.Get(tv, "verbosity") != nil {
		return s.openAI(400, "unsupported_parameter", "text.verbosity", "Unsupported parameter: 'text.verbosity' is not supported with this model."), false
	}
	if f := s.refused(); f != "" {
		return s.openAI(400, "unsupported_parameter", f, "Unsupported parameter: '"+f+"' is not supported with this model."), false
	}
	return s.samplingError(effort)
}

func (s *strict) messages() (errInfo, bool) {
	if f := s.unknownField(dialect.Messages); f != "" {
		return s.anthropic(f + ": Extra inputs are not permitted"), false
	}
	mv := s.get("max_tokens")
	if mv == nil {
		return s.anthropic("max_tokens: Field required"), false
	}
	maxTokens, _ := numberOf(mv)
	if s.info.MaxOutput > 0 && int64(maxTokens) > s.info.MaxOutput {
		return s.anthropic("max_tokens: " + itoa(int64(maxTokens)) + " > " + itoa(s.info.MaxOutput) +
			", which is the maximum allowed number of output tokens for " + s.info.Name), false
	}
	r := &s.info.Reasoning
	thinkingOn := false
	if tv := s.get("thinking"); tv != nil {
		typ := unquote(jsonscan.Get(tv, "type"))
		switch {
		case r.Kind == config.ReasoningNone:
			return s.anthropic("thinking: this model does not support extended thinking"), false
		case r.Kind == config.ReasoningAlways && typ != "adaptive":
			return s.anthropic("thinking.type: " + typ + " is not supported for this model, which always thinks adaptively"), false
		case r.Kind == config.ReasoningBudget && typ == "adaptive":
			return s.anthropic("thinking.type: adaptive thinking is not supported for this model; use thinking.type enabled with budget_tokens"), false
		case r.Kind == config.ReasoningAdaptive && typ == "enabled":
			return s.anthropic("thinking.type: enabled is not supported for this model; use thinking.type adaptive with output_config.effort"), false
		case typ == "enabled":
			b, _ := numberOf(jsonscan.Get(tv, "budget_tokens"))
			if min := r.MinBudget; min > 0 && int64(b) < min {
				return s.anthropic("thinking.enabled.budget_tokens: Input should be greater than or equal to " + itoa(min)), false
			}
			if b >= maxTokens {
				return s.anthropic("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"), false
			}
		}
		thinkingOn = typ == "enabled" || typ == "adaptive"
	}
	if r.Kind == config.ReasoningAlways {
		thinkingOn = true
	}
	if ov := s.get("output_config"); ov != nil {
		if ev := jsonscan.Get(ov, "effort"); ev != nil {
			e := unquote(ev)
			if len(r.Efforts) == 0 || r.Kind == config.ReasoningNone {
				return s.anthropic("output_config.effort: this model does not support the effort parameter"), false
			}
			if !slices.Contains(r.Efforts, e) {
				return s.anthropic("output_config.effort: Input should be " + effortsList(r.Efforts)), false
			}
		}
	}
	if f := s.refused(); f != "" {
		return s.anthropic(f + ": this model does not support " + f), false
	}
	if thinkingOn {
		if n, ok := numberOf(s.get("temperature")); ok && n != 1 {
			return s.anthropic("temperature may only be set to 1 when thinking is enabled or in adaptive mode. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"), false
		}
		if n, ok := numberOf(s.get("top_p")); ok && n < 0.95 {
			return s.anthropic("top_p must be greater than or equal to 0.95 when thinking is enabled"), false
		}
		if s.get("top_k") != nil {
			return s.anthropic("top_k is not supported when thinking is enabled"), false
		}
	}
	return errInfo{}, true
}

// StrictRefusal reports what the mock in strict mode would answer a
// request body of dialect d for model: the error message and true when it
// refuses it. Tests of the gateway's fitting hold their output to it.
func StrictRefusal(d dialect.ID, body []byte, model string) (string, bool) {
	ep := map[dialect.ID]endpoint{dialect.Chat: endpointChat, dialect.Messages: endpointMessages, dialect.Responses: endpointResponses}[d]
	e, ok := strictCheck(ep, body, model)
	return e.msg, !ok
}
