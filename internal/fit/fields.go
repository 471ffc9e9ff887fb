package fit

import (
	"bytes"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// samplingFields are the fields OpenAI's reasoning models take only with
// reasoning effort none (platform.openai.com/docs/guides/reasoning; the
// GPT-5 and GPT-6 migration notes).
var samplingFields = []string{"temperature", "top_p", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias"}

// fields drops what the model or its API refuses: undocumented fields of
// a provider that validates, fields the model refuses, sampling fields of
// a reasoning model that takes them only without reasoning, verbosity
// where it is refused, and (Anthropic) sampling settings thinking does
// not allow.
func (f *Fitter) fields() {
	spec := dialect.Of(f.d)
	info := f.info
	samplingOff := info.SamplingNeedsNoReasoning && f.effort != "none" && f.effort != "unknown"
	for i := range f.members {
		if e := f.edited(i); e != nil && e.drop {
			continue
		}
		k := f.members[i].Key
		switch {
		case bytes.IndexByte(k, '\\') >= 0:
			// An escaped spelling: whatever it names, a validating
			// provider reads it as a field it does not know.
			if info.KnownParamsOnly {
				f.drop(i, string(k), "its API does not document it")
			}
		case !spec.Accepts(k) && !f.modelField(k):
			if info.KnownParamsOnly {
				f.drop(i, string(k), "its API does not document it")
			}
		case has(info.Refuses, k):
			f.drop(i, string(k), "it refuses "+string(k))
		case samplingOff && has(samplingFields, k):
			f.drop(i, string(k), "it takes "+string(k)+" only with reasoning effort none")
		case f.d == dialect.Responses && string(k) == "text" && info.RefusesParam("verbosity"):
			f.dropNested(i, "text", "verbosity", "it refuses verbosity")
		case f.d == dialect.Messages && f.thinkingOn:
			f.thinkingSampling(i, k)
		}
	}
	if samplingOff && f.d == dialect.Responses {
		f.filterInclude("message.output_text.logprobs", "it takes logprobs only with reasoning effort none")
	}
}

// modelField reports a field the model takes beyond its API's list: its
// reasoning toggle.
func (f *Fitter) modelField(name []byte) bool {
	r := &f.info.Reasoning
	return r.Kind == config.ReasoningToggle && r.Toggle == string(name)
}

// thinkingSampling drops the sampling settings Anthropic refuses with
// thinking on: a temperature other than 1, top_p below 0.95, top_k
// (docs.anthropic.com, extended thinking).
func (f *Fitter) thinkingSampling(i int, name []byte) {
	const why = "with thinking on it takes temperature 1, top_p from 0.95 and no top_k"
	switch string(name) {
	case "temperature":
		if v, ok := number(f.value(i)); !ok || v != 1 {
			f.drop(i, "temperature", why)
		}
	case "top_p":
		if v, ok := number(f.value(i)); !ok || v < 0.95 {
			f.drop(i, "top_p", why)
		}
	case "top_k":
		f.drop(i, "top_k", why)
	}
}

// dropNested removes member key from the object member i (and member i
// when it empties), reporting parent.key.
func (f *Fitter) dropNested(i int, parent, key, why string) {
	v := f.value(i)
	if getMember(v, key) == nil {
		return
	}
	off := len(f.scratch)
	f.scratch = append(f.scratch, '{')
	n0 := len(f.scratch)
	f.eachMember(v, func(k, prefix, mv []byte) {
		if string(k) != key {
			f.copyMember(n0, prefix, mv)
		}
	})
	f.scratch = append(f.scratch, '}')
	if len(f.scratch) == off+2 {
		f.scratch = f.scratch[:off]
		f.drop(i, parent+"."+key, why)
		return
	}
	f.replace(i, off)
	f.changes = append(f.changes, Change{Kind: Dropped, Field: parent + "." + key, Why: why})
}

// elements calls fn with each element of the JSON array arr.
func elements(arr []byte, fn func(el []byte)) {
	jsonscan.Elements(arr, func(el []byte) bool {
		fn(el)
		return true
	})
}

// write assembles the fitted body: the members in their order, each
// kept byte for byte, renamed or with its new value, then the added
// members.
func (f *Fitter) write(dst []byte) []byte {
	dst = append(dst, '{')
	first := true
	sep := func() {
		if !first {
			dst = append(dst, ',')
		}
		first = false
	}
	for i := range f.members {
		m := &f.members[i]
		e := f.edited(i)
		switch {
		case e == nil:
			sep()
			dst = append(dst, f.body[m.Start:m.End]...)
		case e.drop:
		default:
			sep()
			if e.key != "" {
				dst = append(dst, '"')
				dst = append(dst, e.key...)
				dst = append(dst, `":`...)
			} else {
				dst = append(dst, f.body[m.Start:m.ValueStart]...)
			}
			if e.n >= 0 {
				dst = append(dst, f.scratch[e.off:e.off+e.n]...)
			} else {
				dst = append(dst, f.body[m.ValueStart:m.End]...)
			}
		}
	}
	for _, a := range f.adds {
		sep()
		dst = append(dst, '"')
		dst = append(dst, a.key...)
		dst = append(dst, `":`...)
		dst = append(dst, f.scratch[a.off:a.off+a.n]...)
	}
	return append(dst, '}')
}
