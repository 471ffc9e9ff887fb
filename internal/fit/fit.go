// Package fit makes a request valid for the model it is sent to. Real
// providers refuse what their model cannot take: an output limit above
// the model's, max_tokens where a reasoning model wants
// max_completion_tokens, a reasoning parameter on a model that does not
// reason (or the wrong family's), a field their API does not document, a
// sampling setting a reasoning model ignores. Given a request body in the
// upstream's dialect and what the model table (internal/modelinfo) says
// about the model, a Fitter clamps, renames, maps and drops top-level
// fields (and a few nested ones: reasoning.effort, text.verbosity,
// include[], thinking, output_config.effort) and reports every change;
// in strict mode it refuses instead, naming the first field it would
// have changed.
//
// It works on the raw JSON, member by member, and copies every byte it
// does not change: a request that needs nothing is not rewritten at all,
// whether the gateway relays it raw or translated it first. The rules
// are in docs/models.md; fit_test.go holds them against the providers'
// documented behaviour.
package fit

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/omniroute/gateway/internal/ascii"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/translate"
)

// Kind is what happened to a field.
type Kind uint8

// The kinds of change.
const (
	// Dropped: the field is not sent.
	Dropped Kind = iota + 1
	// Adjusted: its value changed (From → To), or it was renamed (From
	// and To are the names), or added (From is "").
	Adjusted
)

// Change is one field the fitter changed, named as in the body it fitted.
type Change struct {
	Kind  Kind
	Field string
	From  string
	To    string
	// Why says what the model takes, for a strict refusal's message.
	Why string
}

// String renders a change as the X-OmniRoute-Adjusted header lists it:
// field=from->to.
func (c Change) String() string {
	if c.Kind == Dropped {
		return c.Field
	}
	return c.Field + "=" + c.From + "->" + c.To
}

// Refusal is a strict request that would have needed a change: answered
// 400 in the caller's dialect, naming the field.
type Refusal struct {
	Field   string
	Message string
}

func (r *Refusal) Error() string { return r.Field + ": " + r.Message }

// Options are one fitting's settings.
type Options struct {
	// Strict refuses instead of changing anything (the gateway's own
	// fields in Consume are still removed).
	Strict bool
	// Model, when not "", replaces the model value (an upstream name the
	// config validated: it needs no escaping).
	Model string
	// IncludeUsage sets stream_options.include_usage (a chat stream whose
	// usage the gateway meters).
	IncludeUsage bool
	// Consume lists the gateway's own fields, removed silently (a
	// request's fallbacks: models, fallbacks).
	Consume []string
	// OwnLimit: the body's output limit is the gateway's, not the
	// caller's (a translation wrote its default): fitting it is not a
	// change of the caller's request, neither reported nor refused.
	OwnLimit bool
	// Caller is the caller's dialect when the body was translated for
	// the upstream (0: the body is the caller's). A strict refusal names
	// the caller's field (CallerName), and a change of a field the
	// translation added that the caller's dialect lacks is no refusal.
	Caller dialect.ID
}

// Fitter fits requests. It keeps its buffers across uses; it is not safe
// for concurrent use (the request path keeps one per call).
type Fitter struct {
	members []jsonscan.Member
	edits   []edit
	adds    []add
	changes []Change
	// scratch holds built values; edits refer to it by offset, because
	// it may move as it grows.
	scratch []byte

	d    dialect.ID
	info *modelinfo.Info
	o    *Options
	body []byte

	// The reasoning effort the request ends up asking for ("" when it
	// asks none), for the sampling rule.
	effort string
	// thinkingOn: a messages request ends with thinking on.
	thinkingOn bool
	maxTokens  int64 // the output limit the request ends with (-1: none)
}

type edit struct {
	member int
	drop   bool
	// key, when not "", renames the member.
	key string
	// off, n: the new value in scratch (n < 0: keep the value).
	off, n int
}

type add struct {
	key    string
	off, n int
}

// Changes lists the last Fit's changes (valid until the next Fit).
func (f *Fitter) Changes() []Change { return f.changes }

// Fit fits body, a request in dialect d, to info. members are body's
// top-level members as jsonscan found them (nil: Fit scans). It returns
// the fitted body appended to dst and true, or dst and false when
// nothing changes (the body is sent as it is). In strict mode a needed
// change is a *Refusal.
func (f *Fitter) Fit(dst, body []byte, members []jsonscan.Member, d dialect.ID, info *modelinfo.Info, o *Options) ([]byte, bool, error) {
	f.edits, f.adds, f.changes, f.scratch = f.edits[:0], f.adds[:0], f.changes[:0], f.scratch[:0]
	f.d, f.info, f.o, f.body = d, info, o, body
	f.effort, f.thinkingOn, f.maxTokens = "", false, -1
	if members == nil {
		f.members = f.members[:0]
		if err := jsonscan.Members(body, func(m jsonscan.Member) error {
			f.members = append(f.members, m)
			return nil
		}); err != nil {
			return dst, false, err
		}
		members = f.members
	}
	f.members = members
	f.plumbing()
	if !info.Permissive() {
		f.outputLimit()
		f.reasoning()
		f.fields()
	}
	if len(f.edits) == 0 && len(f.adds) == 0 {
		return dst, false, nil
	}
	if o.Strict {
		caller := o.Caller
		if caller == 0 {
			caller = d
		}
		for _, c := range f.changes {
			if name := CallerName(c.Field, d, caller); name != "" {
				return dst, false, &Refusal{Field: name, Message: c.refusal()}
			}
		}
	}
	return f.write(dst), true, nil
}

// refusal is a change's strict-mode message.
func (c Change) refusal() string {
	switch {
	case c.Kind == Dropped:
		return "the model does not take it (" + c.Why + "); remove it, or send the request without strict mode to have the gateway drop it"
	case c.From == "":
		return "the model needs it (" + c.Why + "); set it, or send the request without strict mode to have the gateway add it"
	}
	return c.From + " does not fit the model (" + c.Why + "; the gateway would send " + c.To + "); change it, or send the request without strict mode to have the gateway adjust it"
}

// plumbing applies the gateway's own edits: consumed fields, the model
// name, the usage request. They are not changes of the caller's request.
func (f *Fitter) plumbing() {
	for i := range f.members {
		k := f.members[i].Key
		switch {
		case has(f.o.Consume, k):
			f.edits = append(f.edits, edit{member: i, drop: true, n: -1})
		case f.o.Model != "" && string(k) == "model":
			off := len(f.scratch)
			f.scratch = strconv.AppendQuote(f.scratch, f.o.Model)
			f.edits = append(f.edits, edit{member: i, off: off, n: len(f.scratch) - off})
		case f.o.IncludeUsage && string(k) == "stream_options":
			off := len(f.scratch)
			f.scratch = append(f.scratch, '{')
			n0 := len(f.scratch)
			f.eachMember(f.value(i), func(k, prefix, v []byte) {
				if string(k) != "include_usage" {
					f.copyMember(n0, prefix, v)
				}
			})
			f.member(n0, "include_usage", []byte("true"))
			f.scratch = append(f.scratch, '}')
			f.edits = append(f.edits, edit{member: i, off: off, n: len(f.scratch) - off})
		}
	}
	if f.o.IncludeUsage && f.find("stream_options") < 0 {
		f.addMember("stream_options", `{"include_usage":true}`)
	}
}

// find returns the index of the member named key, or -1.
func (f *Fitter) find(key string) int {
	for i := range f.members {
		if string(f.members[i].Key) == key {
			return i
		}
	}
	return -1
}

func (f *Fitter) value(i int) []byte {
	m := &f.members[i]
	return f.body[m.ValueStart:m.End]
}

// edited reports whether member i already has an edit.
func (f *Fitter) edited(i int) *edit {
	for j := range f.edits {
		if f.edits[j].member == i {
			return &f.edits[j]
		}
	}
	return nil
}

func (f *Fitter) drop(i int, field, why string) {
	f.remove(i)
	f.changes = append(f.changes, Change{Kind: Dropped, Field: field, Why: why})
}

// remove drops member i without reporting it (a change reported
// otherwise).
func (f *Fitter) remove(i int) {
	if e := f.edited(i); e != nil {
		e.drop = true
		return
	}
	f.edits = append(f.edits, edit{member: i, drop: true, n: -1})
}

// replace sets member i's value to the scratch bytes from off on.
func (f *Fitter) replace(i, off int) {
	if e := f.edited(i); e != nil {
		e.off, e.n = off, len(f.scratch)-off
		return
	}
	f.edits = append(f.edits, edit{member: i, off: off, n: len(f.scratch) - off})
}

func (f *Fitter) rename(i int, key string) {
	if e := f.edited(i); e != nil {
		e.key = key
		return
	}
	f.edits = append(f.edits, edit{member: i, key: key, n: -1})
}

func (f *Fitter) addMember(key, value string) {
	off := len(f.scratch)
	f.scratch = append(f.scratch, value...)
	f.adds = append(f.adds, add{key: key, off: off, n: len(value)})
}

func (f *Fitter) adjusted(field, from, to, why string) {
	f.changes = append(f.changes, Change{Kind: Adjusted, Field: field, From: from, To: to, Why: why})
}

// member appends "k":v to the object being built in scratch, whose
// first member would start at n0.
func (f *Fitter) member(n0 int, k string, v []byte) {
	if len(f.scratch) > n0 {
		f.scratch = append(f.scratch, ',')
	}
	f.scratch = append(f.scratch, '"')
	f.scratch = append(f.scratch, k...)
	f.scratch = append(f.scratch, `":`...)
	f.scratch = append(f.scratch, v...)
}

// copyMember appends a member of the request as it was: its key as
// written (prefix: the key, the colon) and its value.
func (f *Fitter) copyMember(n0 int, prefix, v []byte) {
	if len(f.scratch) > n0 {
		f.scratch = append(f.scratch, ',')
	}
	f.scratch = append(f.scratch, prefix...)
	f.scratch = append(f.scratch, v...)
}

// eachMember calls fn for each member of the object obj: its key
// (unescaped), the key as written with its colon, and its raw value;
// nothing for a value that is not an object.
func (f *Fitter) eachMember(obj []byte, fn func(k, prefix, v []byte)) {
	_ = jsonscan.Members(obj, func(m jsonscan.Member) error {
		fn(m.Key, obj[m.Start:m.ValueStart], obj[m.ValueStart:m.End])
		return nil
	})
}

// getMember returns the raw value of obj's member key, or nil.
func getMember(obj []byte, key string) []byte { return jsonscan.Get(obj, key) }

// str returns a JSON string value's contents (raw; the values compared
// here need no escapes), or nil.
func str(v []byte) []byte {
	v = bytes.TrimSpace(v)
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil
	}
	return v[1 : len(v)-1]
}

// has reports whether list holds the name b (no allocation).
func has(list []string, b []byte) bool {
	for _, s := range list {
		if s == string(b) {
			return true
		}
	}
	return false
}

// integer reads a JSON integer (no allocation); false for anything else
// (null, a fraction, an overflow).
func integer(v []byte) (int64, bool) {
	v = bytes.TrimSpace(v)
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	if len(v) > 18 {
		return 0, false
	}
	n, ok := ascii.ParseDigits(v)
	if !ok {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func number(v []byte) (float64, bool) {
	n, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
	return n, err == nil
}

// outputLimit clamps the output limit to the model's and gives it the
// name the model takes.
func (f *Fitter) outputLimit() {
	max := f.info.MaxOutput
	clamp := func(i int, field string) {
		v := f.value(i)
		n, ok := integer(v)
		if !ok {
			return // null: no limit asked
		}
		if max > 0 && n > max {
			off := len(f.scratch)
			f.scratch = strconv.AppendInt(f.scratch, max, 10)
			f.replace(i, off)
			if !f.o.OwnLimit {
				f.adjusted(field, strconv.FormatInt(n, 10), strconv.FormatInt(max, 10), fmt.Sprintf("it generates at most %d output tokens", max))
			}
			n = max
		}
		f.maxTokens = n
	}
	switch f.d {
	case dialect.Chat:
		mt, mct := f.find("max_tokens"), f.find("max_completion_tokens")
		want := f.info.OutputParam
		for _, c := range []struct {
			i          int
			name, want string
		}{{mt, "max_tokens", config.OutputMaxCompletionTokens}, {mct, "max_completion_tokens", config.OutputMaxTokens}} {
			if c.i < 0 {
				continue
			}
			clamp(c.i, c.name)
			if want != c.want {
				continue
			}
			other := mct
			if c.i == mct {
				other = mt
			}
			if other >= 0 {
				f.drop(c.i, c.name, "it takes "+want+", which the request also sets")
				continue
			}
			f.rename(c.i, want)
			f.adjusted(c.name, c.name, want, "it takes "+want+" instead")
		}
	case dialect.Responses:
		if i := f.find("max_output_tokens"); i >= 0 {
			clamp(i, "max_output_tokens")
		}
	case dialect.Messages:
		i := f.find("max_tokens")
		if i >= 0 {
			clamp(i, "max_tokens")
			return
		}
		// As the translator does: the default, and a thinking budget on
		// top of it.
		n := int64(translate.DefaultMaxTokens)
		if ti := f.find("thinking"); ti >= 0 {
			if b, ok := integer(getMember(f.value(ti), "budget_tokens")); ok && b > 0 {
				n += b
			}
		}
		if max > 0 && n > max {
			n = max
		}
		f.addMember("max_tokens", strconv.FormatInt(n, 10))
		f.adjusted("max_tokens", "", strconv.FormatInt(n, 10), "Anthropic requires an output limit")
		f.maxTokens = n
	}
}
