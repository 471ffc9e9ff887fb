package fit

import (
	"slices"
	"strconv"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate"
)

// Reasoning controls, by dialect:
//
//	chat       reasoning_effort: "<effort>"
//	responses  reasoning: {effort, summary, …}; include: ["reasoning.encrypted_content"]
//	messages   thinking: {type: enabled, budget_tokens} | {type: adaptive} | {type: disabled};
//	           output_config: {effort, …}
//
// and by model (modelinfo.Info.Reasoning.Kind): none drops them all;
// always drops the switch and keeps (clamps) an effort when the model
// lists efforts; effort clamps the effort to the model's levels; budget
// keeps Anthropic's budget within its bounds (an adaptive request gets
// the budget of its effort); adaptive turns a budget into adaptive
// thinking with the budget's effort; toggle turns an effort into the
// model's on/off switch. An unknown kind changes nothing.

// clampEffort returns the level of efforts nearest e: e itself when the
// model takes it, else the highest level below it (but never none, which
// would turn reasoning off that the caller asked for), else the lowest
// level above none.
func clampEffort(e string, efforts []string) string {
	if len(efforts) == 0 || slices.Contains(efforts, e) {
		return e
	}
	at := slices.Index(dialect.Efforts[:], e)
	best := ""
	for _, l := range efforts {
		if i := slices.Index(dialect.Efforts[:], l); i > 0 && i < at {
			best = l
		}
	}
	if best == "" {
		for _, l := range efforts {
			if l != "none" {
				return l
			}
		}
		best = efforts[0]
	}
	return best
}

func (f *Fitter) reasoning() {
	r := &f.info.Reasoning
	if r.Kind == "" {
		f.effort = "unknown"
		return
	}
	switch f.d {
	case dialect.Chat:
		f.chatReasoning(r)
	case dialect.Responses:
		f.responsesReasoning(r)
	case dialect.Messages:
		f.messagesReasoning(r)
	}
	if f.effort == "" && (r.Kind == config.ReasoningEffort || r.Kind == config.ReasoningAlways) {
		f.effort = r.Default
		if f.effort == "" {
			f.effort = "medium"
		}
	}
}

func (f *Fitter) setString(i int, v string) {
	off := len(f.scratch)
	f.scratch = strconv.AppendQuote(f.scratch, v)
	f.replace(i, off)
}

func (f *Fitter) chatReasoning(r *config.ModelReasoning) {
	i := f.find("reasoning_effort")
	if i < 0 {
		return
	}
	e := string(str(f.value(i)))
	switch r.Kind {
	case config.ReasoningNone:
		f.drop(i, "reasoning_effort", "it does not reason")
	case config.ReasoningAlways:
		if len(r.Efforts) == 0 {
			f.drop(i, "reasoning_effort", "it always reasons and takes no effort")
			f.effort = "always"
			return
		}
		fallthrough
	case config.ReasoningEffort:
		to := clampEffort(e, r.Efforts)
		if to != e {
			f.setString(i, to)
			f.adjusted("reasoning_effort", e, to, "its effort levels are "+list(r.Efforts))
		}
		f.effort = to
	case config.ReasoningToggle:
		on := e != "none"
		f.remove(i)
		if f.find(r.Toggle) < 0 {
			f.addMember(r.Toggle, toggleValue(r.Toggle, on))
		}
		f.adjusted("reasoning_effort", e, r.Toggle+":"+strconv.FormatBool(on), "it is switched on and off by "+r.Toggle)
	}
}

func toggleValue(toggle string, on bool) string {
	if toggle == config.ToggleEnableThinking {
		return strconv.FormatBool(on)
	}
	if on {
		return `{"type":"enabled"}`
	}
	return `{"type":"disabled"}`
}

func (f *Fitter) responsesReasoning(r *config.ModelReasoning) {
	i := f.find("reasoning")
	if r.Kind == config.ReasoningNone {
		if i >= 0 {
			f.drop(i, "reasoning", "it does not reason")
		}
		f.filterInclude("reasoning.encrypted_content", "it does not reason")
		return
	}
	if i < 0 {
		return
	}
	v := f.value(i)
	e := string(str(getMember(v, "effort")))
	switch r.Kind {
	case config.ReasoningAlways, config.ReasoningEffort:
		if e == "" {
			return
		}
		to := clampEffort(e, r.Efforts)
		if len(r.Efforts) == 0 {
			to = ""
		}
		if to == e {
			f.effort = e
			return
		}
		off := len(f.scratch)
		f.scratch = append(f.scratch, '{')
		n0 := len(f.scratch)
		f.eachMember(v, func(k, prefix, mv []byte) {
			if string(k) == "effort" {
				if to != "" {
					f.member(n0, "effort", strconv.AppendQuote(nil, to))
				}
				return
			}
			f.copyMember(n0, prefix, mv)
		})
		f.scratch = append(f.scratch, '}')
		if to == "" {
			f.changes = append(f.changes, Change{Kind: Dropped, Field: "reasoning.effort", Why: "it always reasons and takes no effort"})
			if len(f.scratch) == off+2 {
				f.scratch = f.scratch[:off]
				f.drop(i, "reasoning", "it always reasons and takes no effort")
				f.changes = f.changes[:len(f.changes)-1]
				return
			}
		} else {
			f.adjusted("reasoning.effort", e, to, "its effort levels are "+list(r.Efforts))
		}
		f.replace(i, off)
		f.effort = to
	}
}

// filterInclude removes item from the include list (and the list when it
// empties).
func (f *Fitter) filterInclude(item, why string) {
	i := f.find("include")
	if i < 0 {
		return
	}
	v := f.value(i)
	off := len(f.scratch)
	f.scratch = append(f.scratch, '[')
	removed, kept := false, 0
	elements(v, func(el []byte) {
		if string(str(el)) == item {
			removed = true
			return
		}
		if kept > 0 {
			f.scratch = append(f.scratch, ',')
		}
		f.scratch = append(f.scratch, el...)
		kept++
	})
	f.scratch = append(f.scratch, ']')
	if !removed {
		f.scratch = f.scratch[:off]
		return
	}
	if kept == 0 {
		f.scratch = f.scratch[:off]
		f.drop(i, "include", why)
		f.changes[len(f.changes)-1].Field = "include[" + item + "]"
		return
	}
	f.replace(i, off)
	f.changes = append(f.changes, Change{Kind: Dropped, Field: "include[" + item + "]", Why: why})
}

// messagesReasoning fits thinking and output_config.effort. It runs after
// outputLimit, so f.maxTokens is the limit the request ends with.
func (f *Fitter) messagesReasoning(r *config.ModelReasoning) {
	ti, oi := f.find("thinking"), f.find("output_config")
	typ, budget := "", int64(0)
	if ti >= 0 {
		tv := f.value(ti)
		typ = string(str(getMember(tv, "type")))
		budget, _ = integer(getMember(tv, "budget_tokens"))
	}
	effort := ""
	if oi >= 0 {
		effort = string(str(getMember(f.value(oi), "effort")))
	}
	switch r.Kind {
	case config.ReasoningNone:
		if ti >= 0 && typ != "disabled" {
			f.drop(ti, "thinking", "it does not reason")
		}
		f.setEffort(oi, effort, "", "it does not reason")
		return
	case config.ReasoningToggle:
		f.thinkingOn = typ == "enabled" || typ == "adaptive"
		return
	case config.ReasoningAlways:
		if ti >= 0 && typ != "adaptive" {
			f.drop(ti, "thinking", "it always thinks, adaptively")
		}
		to := effort
		if to == "" && budget > 0 {
			to = translate.EffortForBudget(budget)
		}
		if len(r.Efforts) == 0 {
			to = ""
		} else if to != "" {
			to = clampEffort(to, r.Efforts)
		}
		f.setEffort(oi, effort, to, "its effort levels are "+list(r.Efforts))
		f.thinkingOn = true
		return
	case config.ReasoningAdaptive:
		to := effort
		if typ == "enabled" {
			off := len(f.scratch)
			f.scratch = append(f.scratch, `{"type":"adaptive"}`...)
			f.replace(ti, off)
			f.adjusted("thinking", "enabled", "adaptive", "it thinks adaptively, by effort")
			if to == "" && budget > 0 {
				to = translate.EffortForBudget(budget)
			}
		}
		if to != "" {
			to = clampEffort(to, r.Efforts)
		}
		f.setEffort(oi, effort, to, "its effort levels are "+list(r.Efforts))
		f.thinkingOn = typ == "enabled" || typ == "adaptive"
	case config.ReasoningBudget:
		if typ == "adaptive" {
			budget = translate.BudgetForEffort(effort)
			if budget == 0 {
				budget = translate.BudgetForEffort("medium")
			}
		}
		to := ""
		if len(r.Efforts) > 0 && effort != "" {
			to = clampEffort(effort, r.Efforts)
		}
		f.setEffort(oi, effort, to, "it takes no effort level")
		if typ != "enabled" && typ != "adaptive" {
			return
		}
		f.fitBudget(ti, typ, budget, r.MinBudget)
	default:
		// Effort-kind models behind a messages endpoint: the request
		// passes; thinking stays as it is.
		f.thinkingOn = typ == "enabled" || typ == "adaptive"
	}
}

// fitBudget keeps an enabled thinking budget at least min and below
// max_tokens (taking at most three quarters of it, as the translator
// does), or drops thinking when no budget fits.
func (f *Fitter) fitBudget(ti int, typ string, budget, min int64) {
	want := budget
	if lim := f.maxTokens; lim > 0 && want >= lim {
		want = lim - lim/4
	}
	if want < min {
		f.drop(ti, "thinking", "its thinking budget must be at least "+strconv.FormatInt(min, 10)+" and below max_tokens")
		return
	}
	f.thinkingOn = true
	if typ == "enabled" && want == budget {
		return
	}
	off := len(f.scratch)
	f.scratch = append(f.scratch, `{"type":"enabled","budget_tokens":`...)
	f.scratch = strconv.AppendInt(f.scratch, want, 10)
	f.scratch = append(f.scratch, '}')
	f.replace(ti, off)
	if typ == "adaptive" {
		f.adjusted("thinking", "adaptive", "enabled:"+strconv.FormatInt(want, 10), "it thinks by budget, not adaptively")
		return
	}
	f.adjusted("thinking.budget_tokens", strconv.FormatInt(budget, 10), strconv.FormatInt(want, 10), "the budget must be below max_tokens")
}

// setEffort makes output_config.effort to (none when ""), given the
// request's from.
func (f *Fitter) setEffort(oi int, from, to, why string) {
	if oi >= 0 && from == to {
		return
	}
	if oi < 0 {
		if to != "" {
			f.addMember("output_config", `{"effort":`+strconv.Quote(to)+`}`)
			f.adjusted("output_config.effort", "", to, why)
		}
		return
	}
	v := f.value(oi)
	off := len(f.scratch)
	f.scratch = append(f.scratch, '{')
	n0 := len(f.scratch)
	f.eachMember(v, func(k, prefix, mv []byte) {
		if string(k) != "effort" {
			f.copyMember(n0, prefix, mv)
		}
	})
	if to != "" {
		f.member(n0, "effort", strconv.AppendQuote(nil, to))
	}
	f.scratch = append(f.scratch, '}')
	switch {
	case to == "" && len(f.scratch) == off+2:
		f.scratch = f.scratch[:off]
		f.drop(oi, "output_config.effort", why)
	case to == "":
		f.replace(oi, off)
		f.changes = append(f.changes, Change{Kind: Dropped, Field: "output_config.effort", Why: why})
	default:
		f.replace(oi, off)
		f.adjusted("output_config.effort", from, to, why)
	}
}

func list(efforts []string) string {
	out := ""
	for i, e := range efforts {
		if i > 0 {
			out += ", "
		}
		out += e
	}
	return out
}
