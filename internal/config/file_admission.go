package config

import (
	"strings"
)

// Fusion configures a fusion model: its targets are the panel, asked in
// parallel without streaming; the answers of the members that succeed go to
// a judge whose answer is returned.
type Fusion struct {
	// Quorum is how many panel members must answer (default: a majority,
	// (panel size + 1) / 2).
	Quorum int `json:"quorum,omitempty"`
	// Judge is a model name, or the name of one of this model's targets as
	// shown in X-OmniRoute-Target ("provider/connection/model"). Default:
	// the first panel member that answered.
	Judge string `json:"judge,omitempty"`
	// JudgePrompt is the instruction sent to the judge after the caller's
	// conversation; it must contain {{answers}}, which is replaced by the
	// numbered panel answers.
	JudgePrompt string `json:"judge_prompt,omitempty"`
}

// DefaultJudgePrompt is used when a fusion model sets no judge_prompt.
const DefaultJudgePrompt = "Several assistants answered the conversation above independently. Their answers follow.\n\n" +
	"{{answers}}\n\n" +
	"Write the single best answer to the last user message: keep what is correct, fix what is wrong, and combine the useful parts. " +
	"Reply with the answer itself, without mentioning the assistants or this instruction."

// maxJudgePrompt bounds the judge prompt template.
const maxJudgePrompt = 16 << 10

// EffectiveQuorum returns the quorum after defaults for a panel of n.
func (f *Fusion) EffectiveQuorum(n int) int {
	if f != nil && f.Quorum > 0 {
		return f.Quorum
	}
	return (n + 1) / 2
}

// EffectivePrompt returns the judge prompt template after defaults.
func (f *Fusion) EffectivePrompt() string {
	if f != nil && f.JudgePrompt != "" {
		return f.JudgePrompt
	}
	return DefaultJudgePrompt
}

// TargetName is the name a target of model model is shown by
// ("provider/connection/upstream-model"); ok is false when its connection
// does not resolve.
func (f *File) TargetName(model string, t Target) (string, bool) {
	pid, cid, err := f.ResolveConnection(t.Connection)
	if err != nil {
		return "", false
	}
	shown := t.Model
	if shown == "" {
		shown = model
	}
	return pid + "/" + cid + "/" + shown, true
}

func init() {
	fileValidators = append(fileValidators, validateAdmissionSections)
}

func validateAdmissionSections(f *File) []string {
	var errs problems
	// tenants[].class is checked with the rest of the policy
	// (file_tenants.go); a test holds its names to admission's.
	for name, m := range sorted(f.Models) {
		path := "models." + name
		for i, t := range m.Targets {
			if t.MaxConcurrent < 0 || t.MaxConcurrent > 1_000_000 {
				errs.add("%s.targets[%d].max_concurrent: must be between 0 (no cap) and 1000000", path, i)
			}
		}
		if m.Strategy != StrategyFusion {
			if m.Fusion != nil {
				errs.add("%s.fusion: set only on a model with \"strategy\": \"fusion\"", path)
			}
			continue
		}
		n := len(m.Targets)
		if n < 2 {
			errs.add("%s.targets: a fusion model needs at least 2 targets (the panel)", path)
		}
		fu := m.Fusion
		if fu == nil {
			continue
		}
		if fu.Quorum < 0 || (n > 0 && fu.Quorum > n) {
			errs.add("%s.fusion.quorum: must be between 1 and the panel size %d (0 = majority)", path, n)
		}
		if fu.JudgePrompt != "" {
			if !strings.Contains(fu.JudgePrompt, "{{answers}}") {
				errs.add("%s.fusion.judge_prompt: must contain {{answers}}, where the panel's answers go", path)
			}
			if len(fu.JudgePrompt) > maxJudgePrompt {
				errs.add("%s.fusion.judge_prompt: longer than %d bytes", path, maxJudgePrompt)
			}
		}
		if fu.Judge == "" {
			continue
		}
		if jm, ok := f.Models[fu.Judge]; ok {
			switch {
			case fu.Judge == name:
				errs.add("%s.fusion.judge: a fusion model cannot judge itself; name another model or one of its targets", path)
			case jm.Strategy == StrategyFusion:
				errs.add("%s.fusion.judge: %q is itself a fusion model; the judge must be a plain model or a combo", path, fu.Judge)
			}
			continue
		}
		found := false
		var names []string
		for _, t := range m.Targets {
			if tn, ok := f.TargetName(name, t); ok {
				names = append(names, tn)
				found = found || tn == fu.Judge
			}
		}
		if !found {
			errs.add("%s.fusion.judge: %q is neither a model nor a target of this model (targets: %s)", path, fu.Judge, strings.Join(names, ", "))
		}
	}
	return errs
}
