package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// ModelInfo is what the gateway believes about an upstream model: its
// limits, how it reasons, which optional parameters it refuses. The
// shipped model table (internal/modelinfo) is written in it; the config
// file's model_info section and a target's model_info override it field
// by field (an absent field keeps the value below it). internal/fit makes
// each request fit it.
type ModelInfo struct {
	// ContextWindow is the model's window in tokens (prompt and answer);
	// a prompt estimated above it skips the target. 0: unknown.
	ContextWindow *int64 `json:"context_window,omitempty"`
	// MaxOutput is the most output tokens the model generates in one
	// answer; larger limits are clamped to it. 0: unknown (no clamp).
	MaxOutput *int64 `json:"max_output,omitempty"`
	// OutputParam is the output-limit field a chat-dialect request must
	// use: max_tokens, max_completion_tokens (OpenAI's reasoning models),
	// or "" (either).
	OutputParam *string `json:"output_param,omitempty"`
	// Reasoning is how the model reasons and which parameter controls it.
	Reasoning *ModelReasoning `json:"reasoning,omitempty"`
	// Refuses lists optional request fields the model refuses (by their
	// name in any dialect: temperature, top_p, verbosity, ...).
	Refuses *[]string `json:"refuses,omitempty"`
	// SamplingNeedsNoReasoning: temperature, top_p, logprobs and their
	// kin are taken only with reasoning effort "none" (OpenAI's GPT-5.1
	// and later).
	SamplingNeedsNoReasoning *bool `json:"sampling_needs_no_reasoning,omitempty"`
	// KnownParamsOnly: the provider refuses fields its API reference does
	// not document (OpenAI, Anthropic); they are dropped.
	KnownParamsOnly *bool `json:"known_params_only,omitempty"`
	// Tools and Images say whether the model takes tool definitions and
	// image inputs; a request with tools skips a target without them.
	Tools  *bool `json:"tools,omitempty"`
	Images *bool `json:"images,omitempty"`
	// CacheControl: the model takes Anthropic cache_control breakpoints
	// (the translator adds them for a chat or Responses caller).
	CacheControl *bool `json:"cache_control,omitempty"`
	// Strict refuses a request that would need changing (400 naming the
	// field) instead of changing it.
	Strict *bool `json:"strict,omitempty"`
}

// ModelReasoning is a model's reasoning control.
type ModelReasoning struct {
	// Kind is one of ReasoningKinds.
	Kind string `json:"kind"`
	// Efforts are the effort levels the model takes (dialect.Efforts
	// names), for kinds effort, adaptive and always.
	Efforts []string `json:"efforts,omitempty"`
	// Default is the effort the model uses when a request names none
	// (it decides whether sampling fields pass, see
	// SamplingNeedsNoReasoning).
	Default string `json:"default,omitempty"`
	// MinBudget is the smallest thinking budget (kind budget; Anthropic:
	// 1024).
	MinBudget int64 `json:"min_budget,omitempty"`
	// Toggle is the switch of kind toggle: enable_thinking (a boolean) or
	// thinking ({"type": "enabled"|"disabled"}).
	Toggle string `json:"toggle,omitempty"`
}

// The reasoning kinds of a model.
const (
	// ReasoningNone: the model does not reason; reasoning fields are
	// dropped.
	ReasoningNone = "none"
	// ReasoningAlways: the model always reasons; the switch is dropped,
	// an effort is kept (clamped) when Efforts lists any.
	ReasoningAlways = "always"
	// ReasoningEffort: OpenAI's reasoning_effort / reasoning.effort.
	ReasoningEffort = "effort"
	// ReasoningBudget: Anthropic's thinking {type: enabled,
	// budget_tokens}.
	ReasoningBudget = "budget"
	// ReasoningAdaptive: Anthropic's thinking {type: adaptive} with
	// output_config.effort.
	ReasoningAdaptive = "adaptive"
	// ReasoningToggle: an on/off switch (Qwen's enable_thinking, GLM's
	// thinking.type).
	ReasoningToggle = "toggle"
)

// ReasoningKinds lists every kind.
var ReasoningKinds = []string{ReasoningNone, ReasoningAlways, ReasoningEffort, ReasoningBudget, ReasoningAdaptive, ReasoningToggle}

// Reasoning toggles and chat output-limit fields.
const (
	ToggleEnableThinking = "enable_thinking"
	ToggleThinking       = "thinking"

	OutputMaxTokens           = "max_tokens"
	OutputMaxCompletionTokens = "max_completion_tokens"
)

// ModelInfoTable is the model_info section: upstream model name or glob
// → the fields to override or add. Each entry is decoded on its own, so a
// mistake names its entry.
type ModelInfoTable map[string]ModelInfo

// UnmarshalJSON implements json.Unmarshaler, strictly per entry.
func (t *ModelInfoTable) UnmarshalJSON(b []byte) error {
	return decodeTable(b, (*map[string]ModelInfo)(t), "model_info", "an object of upstream model name or pattern → {context_window, max_output, …}")
}

// maxModelTokens bounds context windows and output limits.
const maxModelTokens = 1 << 27

// Validate checks m; every problem starts with path.
func (m *ModelInfo) Validate(path string) []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(path+format, args...)) }
	for _, f := range []struct {
		name string
		v    *int64
	}{{"context_window", m.ContextWindow}, {"max_output", m.MaxOutput}} {
		if f.v != nil && (*f.v < 0 || *f.v > maxModelTokens) {
			add(".%s: want tokens from 0 (unknown) to %d, got %d", f.name, maxModelTokens, *f.v)
		}
	}
	if m.OutputParam != nil {
		switch *m.OutputParam {
		case "", OutputMaxTokens, OutputMaxCompletionTokens:
		default:
			add(".output_param: %q is not an output-limit field; want max_tokens, max_completion_tokens or \"\"", *m.OutputParam)
		}
	}
	if r := m.Reasoning; r != nil {
		validKind := slices.Contains(ReasoningKinds, r.Kind)
		if !validKind {
			add(".reasoning.kind: %q is not a reasoning kind; want one of %v", r.Kind, ReasoningKinds)
		}
		for i, e := range r.Efforts {
			if !slices.Contains(dialect.Efforts[:], e) {
				add(".reasoning.efforts[%d]: %q is not an effort level; want one of %v", i, e, dialect.Efforts)
			}
		}
		if r.Default != "" && !slices.Contains(r.Efforts, r.Default) {
			add(".reasoning.default: %q is not one of the model's efforts %v", r.Default, r.Efforts)
		}
		if validKind && len(r.Efforts) > 0 && r.Kind != ReasoningEffort && r.Kind != ReasoningAdaptive && r.Kind != ReasoningAlways && r.Kind != ReasoningBudget {
			add(".reasoning.efforts: kind %q takes no effort levels", r.Kind)
		}
		if r.MinBudget < 0 || r.MinBudget > maxModelTokens {
			add(".reasoning.min_budget: want tokens from 0 to %d", maxModelTokens)
		}
		switch {
		case r.Kind == ReasoningToggle && r.Toggle != ToggleEnableThinking && r.Toggle != ToggleThinking:
			add(".reasoning.toggle: kind toggle needs toggle enable_thinking or thinking, got %q", r.Toggle)
		case r.Kind != ReasoningToggle && r.Toggle != "":
			add(".reasoning.toggle: only kind toggle takes a toggle")
		}
	}
	if m.Refuses != nil {
		for i, p := range *m.Refuses {
			if !KnownParam(p) {
				add(".refuses[%d]: %q is not a request field of any API the gateway speaks", i, p)
			}
		}
	}
	return errs
}

// KnownParam reports whether name is a top-level request field of some
// dialect, or a nested one the model table may name (text.verbosity is
// refused as verbosity).
func KnownParam(name string) bool {
	for _, id := range dialect.All {
		if slices.Contains(dialect.Of(id).Params, name) {
			return true
		}
	}
	return false
}

func init() { fileValidators = append(fileValidators, validateModelInfo) }

// validateModelInfo checks the model_info section and every target's
// model_info.
func validateModelInfo(f *File) []string {
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(f.ModelInfo)) {
		if err := tenantpolicy.ValidPattern(k); err != nil {
			errs = append(errs, fmt.Sprintf("model_info.%s: %v", k, err))
		}
		m := f.ModelInfo[k]
		errs = append(errs, m.Validate("model_info."+k)...)
	}
	for name, m := range sorted(f.Models) {
		for i, t := range m.Targets {
			if t.ModelInfo != nil {
				errs = append(errs, t.ModelInfo.Validate(fmt.Sprintf("models.%s.targets[%d].model_info", name, i))...)
			}
		}
	}
	return errs
}
