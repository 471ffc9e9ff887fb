package translate

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate/ir"
)

// The request readers share one walk: every object of a request is read
// member by member through a table of its dialect that says, per key, how
// the value is read and where it goes (a field of the IR request, a slot
// of the object's record, or a nested reader). What an object makes (a
// part, a tool, a turn) is then decided from its record by the object's
// type, through tables of the dialect's words (roles, part types, tool
// types, tool_choice words). The readers of the three dialects are these
// tables and the few decisions that differ in kind (read_chat.go,
// read_messages.go, read_responses.go).

// loc names a field of the caller's body, such as
// messages[3].content[0].type, for an error message. It is a value built
// as the readers descend and rendered only when an error is made, so
// naming fields costs a successful translation nothing.
type loc struct {
	seg [6]string
	idx [6]int32 // index after seg[i], -1 for none
	n   int
}

// at starts a path at a top-level field.
func at(key string) loc { return loc{}.at(key) }

// at descends into member key (a constant: a table's key). Past the depth
// bound the last segment is replaced.
func (l loc) at(key string) loc {
	if l.n == len(l.seg) {
		l.n--
	}
	l.seg[l.n], l.idx[l.n] = key, -1
	l.n++
	return l
}

// index descends into element i of the array at l.
func (l loc) index(i int) loc {
	if l.n > 0 {
		l.idx[l.n-1] = int32(i)
	}
	return l
}

func (l loc) String() string {
	var b []byte
	for i := 0; i < l.n; i++ {
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, l.seg[i]...)
		if l.idx[i] >= 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(l.idx[i]), 10)
			b = append(b, ']')
		}
	}
	return string(b)
}

// slot names what a member leaves in its object's record: a value (the
// slots below nValues) or only that it was there (or, for a vTrue member,
// that it was true).
type slot uint8

const (
	sNone slot = iota
	sType
	sRole
	sText
	sID
	sCallID
	sName
	sArgs
	sURL
	sDetail
	sFileData
	sFileID
	sFileURL
	sFilename
	sMediaType
	sData
	sSig
	sEnc
	sSummary
	sDesc
	sSchema
	sStrict
	sCache
	nValues
)

// Presence flags.
const (
	fContent slot = nValues + iota // a content member
	fOutput                        // a tool output item's output
	fCustom                        // a chat tool call's "custom" object
	fIsError                       // is_error: true
	fTrue                          // a vTrue member (include_usage, disable_parallel_tool_use) was true
)

// record is what the members of one object left for its decision. Its
// values are raw strings or raw JSON aliasing the caller's body.
type record struct {
	v    [nValues][]byte
	has  uint64
	n    int64     // a vInt member
	src  ir.Source // an Anthropic block's source
	span ir.Span   // an Anthropic tool result's content, in Request.Inner
	// extra holds up to four keys the table does not name, for an
	// other hook that reports them only once the object is kept.
	extra  [4][]byte
	nExtra int
}

func (o *record) is(s slot) bool { return o.has&(1<<s) != 0 }

// kind is how a member's value is read.
type kind uint8

const (
	vStr       kind = iota + 1 // a string (refused otherwise)
	vStrOrSkip                 // a string; any other value ignored
	vNum                       // a number
	vObj                       // an object, kept raw
	vRaw                       // any value, kept raw
	vTrue                      // a boolean: the slot's flag stays set only when true
	vInt                       // a non-negative integer, into record.n
	vSub                       // an object whose members sub reads into the same record
	vObject                    // an object sub reads with a record of its own (nothing kept here)
	vFn                        // fn reads the value (and puts it where it goes)
	vSkip                      // ignored
	vDrop                      // ignored, reported dropped as what
	vRefuse                    // refused: the upstream cannot carry what
)

// member says how one member of an object is read.
type member struct {
	kind kind
	slot slot
	// into, when set, is the IR request field a value goes to instead
	// of a slot.
	into func(*ir.Request) *[]byte
	sub  *table
	fn   func(*Translator, loc) error
	// path is the member's name in error messages; the key when "".
	path string
	what string
}

// table is the members of one kind of object in one dialect.
type table struct {
	members map[string]member
	// nullIsAbsent: a member whose value is null is skipped (as the API
	// treats it); otherwise null is read like any value, and refused
	// where a string or an object must be.
	nullIsAbsent bool
	// other handles a member the table does not name; its value is
	// already skipped. nil ignores it.
	other func(t *Translator, o *record, k []byte)
}

// entries are a table's members by key; a key may list alternatives
// separated by spaces ("text refusal"), each its own path.
type entries map[string]member

func newTable(nullIsAbsent bool, other func(*Translator, *record, []byte), es ...entries) *table {
	tab := &table{members: map[string]member{}, nullIsAbsent: nullIsAbsent, other: other}
	for _, e := range es {
		for keys, m := range e {
			for _, k := range strings.Fields(keys) {
				mk := m
				if mk.path == "" {
					mk.path = k
				}
				tab.members[k] = mk
			}
		}
	}
	return tab
}

// Member constructors for the tables.
func str(s slot) member                          { return member{kind: vStr, slot: s} }
func strInto(f func(*ir.Request) *[]byte) member { return member{kind: vStr, into: f} }
func numInto(f func(*ir.Request) *[]byte) member { return member{kind: vNum, into: f} }
func objInto(f func(*ir.Request) *[]byte) member { return member{kind: vObj, into: f} }
func raw(s slot) member                          { return member{kind: vRaw, slot: s} }
func fn(f func(*Translator, loc) error) member   { return member{kind: vFn, fn: f} }
func sub(tab *table) member                      { return member{kind: vSub, sub: tab} }
func nested(tab *table) member                   { return member{kind: vObject, sub: tab} }
func flag(s slot) member                         { return member{kind: vTrue, slot: s} }
func drop(what string) member                    { return member{kind: vDrop, what: what} }
func refuse(what string) member                  { return member{kind: vRefuse, what: what} }

var skip = member{kind: vSkip}

// dropKey reports an unknown member dropped under its own name.
func dropKey(t *Translator, _ *record, k []byte) { t.drop(string(k)) }

// dropUnder reports unknown members dropped as prefix+key.
func dropUnder(prefix string) func(*Translator, *record, []byte) {
	return func(t *Translator, _ *record, k []byte) { t.drop(prefix + string(k)) }
}

// object reads the object at the cursor through tab and returns the
// record of what its members left, valid until the next object at the
// same depth is read (objects nest a few levels: a depth bound keeps the
// records in the Translator, so reading allocates nothing).
func (t *Translator) object(field loc, tab *table) (*record, error) {
	if !t.cur.Object() {
		return nil, t.invalid(field, "must be an object")
	}
	if t.depth == len(t.recs) {
		return nil, t.invalid(field, "nests objects too deeply")
	}
	o := &t.recs[t.depth]
	*o = record{}
	t.depth++
	err := t.members(field, tab, o)
	t.depth--
	return o, err
}

// rec is the record of the object being read.
func (t *Translator) rec() *record { return &t.recs[t.depth-1] }

// subObject reads a nested object whose members belong to the enclosing
// object's record (chat's image_url and function objects).
func (t *Translator) subObject(field loc, tab *table) error {
	if !t.cur.Object() {
		return t.invalid(field, "must be an object")
	}
	return t.members(field, tab, t.rec())
}

func (t *Translator) members(field loc, tab *table, o *record) error {
	c := &t.cur
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		if tab.nullIsAbsent && c.Null() {
			continue
		}
		m, known := tab.members[string(k)]
		if !known {
			c.Skip()
			if tab.other != nil {
				tab.other(t, o, k)
			}
			continue
		}
		o.has |= 1 << m.slot
		if err := t.value(&m, o, field.at(m.path)); err != nil {
			return err
		}
	}
	return nil
}

// value reads one member's value as m says.
func (t *Translator) value(m *member, o *record, field loc) error {
	c := &t.cur
	var v []byte
	switch m.kind {
	case vStr:
		if v = ir.StrRS(c); v == nil {
			return t.invalid(field, "must be a string")
		}
	case vStrOrSkip:
		if v = ir.StrRS(c); v == nil {
			c.Skip()
		}
	case vNum:
		if v = c.Number(); v == nil {
			return t.invalid(field, "must be a number")
		}
	case vObj:
		if c.Peek() != '{' {
			return t.invalid(field, "must be an object")
		}
		v = c.Skip()
	case vRaw:
		v = c.Skip()
	case vTrue:
		if t.readTri() != ir.True {
			o.has &^= 1 << m.slot
		}
		return nil
	case vInt:
		n, err := t.readInt(field)
		o.n = n
		return err
	case vSub:
		return t.subObject(field, m.sub)
	case vObject:
		_, err := t.object(field, m.sub)
		return err
	case vFn:
		return m.fn(t, field)
	case vSkip:
		c.Skip()
		return nil
	case vDrop:
		c.Skip()
		t.drop(m.what)
		return nil
	case vRefuse:
		c.Skip()
		return t.unsupported(field, m.what)
	}
	if m.into != nil {
		*m.into(&t.req) = v
	} else {
		o.v[m.slot] = v
	}
	return nil
}

// request reads a request body through its dialect's top-level table.
func (t *Translator) request(tab *table) error {
	if t.cur.Peek() != '{' {
		return t.invalid(at("body"), "must be a JSON object")
	}
	_, err := t.object(loc{}, tab)
	return err
}

// each reads the array at the cursor, element by element.
func (t *Translator) each(field loc, elem func(*Translator, loc) error) error {
	c := &t.cur
	if !c.Array() {
		return t.invalid(field, "must be an array")
	}
	for i := 0; c.Next(); i++ {
		if err := elem(t, field.index(i)); err != nil {
			return err
		}
	}
	return nil
}

// contentList reads a content value that is a string (one text part) or
// an array whose elements part reads.
func (t *Translator) contentList(field loc, part func(*Translator, loc) error) error {
	if s := ir.StrRS(&t.cur); s != nil {
		t.req.Add(ir.Part{Kind: ir.KindText, Text: s})
		return nil
	}
	if t.cur.Peek() != '[' {
		return t.invalid(field, "must be a string or an array of content parts")
	}
	return t.each(field, part)
}

// Members every dialect's request has, by the same name.
var sharedRequest = entries{
	"model":       skip,
	"temperature": numInto(func(r *ir.Request) *[]byte { return &r.Temperature }),
	"top_p":       numInto(func(r *ir.Request) *[]byte { return &r.TopP }),
	"stream":      fn(func(t *Translator, _ loc) error { t.req.Stream = t.readTri() == ir.True; return nil }),
}

// Members chat and Responses share.
var openAIRequest = entries{
	"parallel_tool_calls": fn(func(t *Translator, _ loc) error { t.req.Parallel = t.readTri(); return nil }),
	"user":                strInto(func(r *ir.Request) *[]byte { return &r.User }),
	"safety_identifier":   strInto(func(r *ir.Request) *[]byte { return &r.SafetyID }),
	"prompt_cache_key":    strInto(func(r *ir.Request) *[]byte { return &r.PromptCacheKey }),
	"metadata":            objInto(func(r *ir.Request) *[]byte { return &r.Metadata }),
	"service_tier":        strInto(func(r *ir.Request) *[]byte { return &r.ServiceTier }),
	"store": fn(func(t *Translator, _ loc) error {
		if t.readTri() == ir.True {
			t.drop("store")
		}
		return nil
	}),
}

// openAIEffort reads an effort of the OpenAI scale (chat's
// reasoning_effort, Responses' reasoning.effort).
var openAIEffort = fn(func(t *Translator, f loc) error { return t.readEffort(f, ir.EffortNone, ir.EffortXHigh) })

// readMaxTokens reads the output limit, whatever the dialect calls it.
func readMaxTokens(t *Translator, f loc) (err error) {
	t.req.MaxTokens, err = t.readInt(f)
	return err
}

// readTri consumes a boolean (anything else is left as Unset and skipped).
func (t *Translator) readTri() ir.Tri {
	v, ok := t.cur.Bool()
	if !ok {
		t.cur.Skip()
		return ir.Unset
	}
	if v {
		return ir.True
	}
	return ir.False
}

// readInt consumes a non-negative integer.
func (t *Translator) readInt(field loc) (int64, error) {
	n, ok := t.cur.Int()
	if !ok || n < 0 {
		return 0, t.invalid(field, "must be a non-negative integer")
	}
	return n, nil
}

// readRS consumes a string value as a raw string.
func (t *Translator) readRS(field loc) ([]byte, error) {
	if s := ir.StrRS(&t.cur); s != nil {
		return s, nil
	}
	return nil, t.invalid(field, "must be a string")
}

// readStops reads a stop value: a string or an array of strings.
func (t *Translator) readStops(field loc) error {
	c := &t.cur
	if s := ir.StrRS(c); s != nil {
		t.req.Stop = append(t.req.Stop, s)
		return nil
	}
	if c.Peek() != '[' {
		return t.invalid(field, "must be a string or an array of strings")
	}
	return t.each(field, func(t *Translator, f loc) error {
		s, err := t.readRS(f)
		t.req.Stop = append(t.req.Stop, s)
		return err
	})
}

// readEffort reads a reasoning effort word of the caller's scale, least
// to most.
func (t *Translator) readEffort(field loc, least, most ir.Effort) error {
	s, err := t.readRS(field)
	if err != nil {
		return err
	}
	if e := ir.ParseEffort(s); e >= least && e <= most {
		t.req.Reasoning.Effort = e
		return nil
	}
	return t.invalid(field, "unknown effort %q; use one of %s", s, ir.EffortList(least, most))
}

// Turns.

// placement is where a message's parts go, by its role.
type placement uint8

const (
	placeUser placement = iota + 1
	placeAssistant
	placeSystem // hoisted into the system prompt
	placeTool   // a tool result, in a user turn
)

// roles is a dialect's role words.
type roles struct {
	words map[string]placement
	list  string // for the error: "user, assistant or system"
}

func newRoles(words ...string) *roles {
	rs := &roles{words: map[string]placement{}}
	for i := 0; i < len(words); i += 2 {
		rs.words[words[i]] = map[string]placement{"user": placeUser, "assistant": placeAssistant, "system": placeSystem, "tool": placeTool}[words[i+1]]
		if i > 0 {
			if i+2 == len(words) {
				rs.list += " or "
			} else {
				rs.list += ", "
			}
		}
		rs.list += words[i]
	}
	return rs
}

// place puts the parts from lo on (a message just read) where its role
// says.
func (t *Translator) place(rs *roles, role []byte, lo int32, field loc, callID []byte) error {
	r := &t.req
	switch rs.words[string(role)] {
	case placeUser:
		r.Push(ir.RoleUser, lo)
	case placeAssistant:
		r.Push(ir.RoleAssistant, lo)
	case placeSystem:
		return t.hoist(lo, field.at("content"), role)
	case placeTool:
		if callID == nil {
			return t.invalid(field.at("tool_call_id"), "a tool message needs the tool_call_id it answers")
		}
		r.Add(ir.Part{Kind: ir.KindToolResult, ID: callID, Result: r.MoveInner(lo)})
		r.Push(ir.RoleUser, lo)
	default:
		if role == nil {
			return t.invalid(field.at("role"), "is missing")
		}
		return t.invalid(field.at("role"), "unknown role %q (use %s)", role, rs.list)
	}
	return nil
}

// hoist moves the parts from lo on, which must be text, to the system
// prompt: a system message wherever the caller's dialect puts one (role
// names it for the error; nil: the Anthropic system field).
func (t *Translator) hoist(lo int32, field loc, role []byte) error {
	r := &t.req
	for _, p := range r.Parts[lo:] {
		if p.Kind != ir.KindText {
			if role == nil {
				return t.invalid(field, "may hold only text blocks")
			}
			return t.invalid(field, "a %s message may hold only text", role)
		}
		r.System = append(r.System, p)
	}
	r.Parts = r.Parts[:lo]
	return nil
}

// Content parts.

// partType is what an OpenAI content part of one type makes.
type partType struct {
	kind ir.Kind // 0: refused (what)
	// from are the slots a media part's source may come from, in order.
	from []slot
	// missing is the error when the part has none of them (at the part,
	// or at missingAt below it).
	missing, missingAt string
	what               string
}

// partTypes is a dialect's content part types and where its media values
// sit, for errors.
type partTypes struct {
	types map[string]partType
	paths [nValues]string
}

// openAIPart makes the part an OpenAI content part's record describes.
func (t *Translator) openAIPart(pt *partTypes, o *record, field loc) error {
	typ := o.v[sType]
	spec, ok := pt.types[string(typ)]
	switch {
	case !ok:
		return t.invalid(field.at("type"), "unknown content part type %q", typ)
	case spec.kind == 0:
		return t.unsupported(field.at("type"), spec.what)
	case spec.kind == ir.KindText:
		if o.v[sText] == nil {
			if spec.missingAt != "" {
				return t.invalid(field.at(spec.missingAt), "%s", spec.missing)
			}
			return t.invalid(field, "a %s part needs its %s", typ, typ)
		}
		t.req.Add(ir.Part{Kind: ir.KindText, Text: o.v[sText], Cache: o.v[sCache]})
		return nil
	}
	p := ir.Part{Kind: spec.kind, Cache: o.v[sCache]}
	if spec.kind == ir.KindImage {
		p.Detail = o.v[sDetail]
	} else {
		p.Filename = o.v[sFilename]
	}
	for _, s := range spec.from {
		v := o.v[s]
		if v == nil {
			continue
		}
		switch s {
		case sURL, sFileData:
			if err := t.mediaFromURL(&p, v, field.at(pt.paths[s])); err != nil {
				return err
			}
			if s == sFileData && p.Src != ir.SrcBase64 {
				return t.invalid(field.at(pt.paths[s]), "must be a base64 data URL")
			}
		case sFileURL:
			p.Src, p.Data = ir.SrcURL, v
		case sFileID:
			p.Src, p.Data = ir.SrcFile, v
		}
		t.req.Add(p)
		return nil
	}
	if spec.missingAt != "" {
		return t.invalid(field.at(spec.missingAt), "%s", spec.missing)
	}
	return t.invalid(field, "%s", spec.missing)
}

var base64Marker = []byte(";base64,")

// mediaFromURL fills an image or document part from an OpenAI URL value:
// a base64 data URL becomes SrcBase64 with its media type, anything else
// SrcURL. A data URL that is not base64 is refused: no other dialect can
// carry it.
func (t *Translator) mediaFromURL(p *ir.Part, url []byte, field loc) error {
	if !bytes.HasPrefix(url, []byte("data:")) {
		p.Src, p.Data = ir.SrcURL, url
		return nil
	}
	i := bytes.Index(url, base64Marker)
	if i < 0 {
		return t.invalid(field, "a data URL must be base64-encoded (data:<media type>;base64,<data>)")
	}
	p.Src, p.MediaType, p.Data = ir.SrcBase64, url[len("data:"):i], url[i+len(base64Marker):]
	return nil
}

// Tools.

// toolKinds is a dialect's tool types: the kind each makes; a type not
// listed is a hosted tool only the caller's provider runs, dropped.
type toolKinds map[string]ir.ToolKind

// namespaceTool marks the Responses namespace type in a toolKinds: its
// members were added as tools of their own.
const namespaceTool ir.ToolKind = 255

// tool keeps the tool definition a record describes. It reports false
// for a tool dropped by its type.
func (t *Translator) tool(kinds toolKinds, o *record, field loc, nameAt string) (bool, error) {
	typ := o.v[sType]
	k := kinds[string(typ)]
	switch k {
	case 0:
		t.drop("tools[].type=" + string(typ))
		return false, nil
	case namespaceTool:
		return false, nil
	}
	if o.v[sName] == nil {
		return false, t.invalid(field.at(nameAt), "is missing")
	}
	t.req.Tools = append(t.req.Tools, ir.Tool{Kind: k, Name: o.v[sName], Description: o.v[sDesc],
		Schema: o.v[sSchema], Strict: o.v[sStrict], Cache: o.v[sCache]})
	return true, nil
}

// The members of an OpenAI function or custom tool's definition (chat's
// inner object, a Responses tool itself).
var toolBody = entries{
	"name":        str(sName),
	"description": str(sDesc),
	"parameters":  {kind: vObj, slot: sSchema},
	"strict":      raw(sStrict),
	"format":      drop("tools[].format"), // a custom tool's grammar: no other dialect has one
}

// Tool choice.

// choiceWords is a dialect's tool_choice words.
type choiceWords map[string]ir.ChoiceMode

// openAIWords are the tool_choice strings of chat and Responses.
var openAIWords = choiceWords{"auto": ir.ChoiceAuto, "none": ir.ChoiceNone, "required": ir.ChoiceRequired}

// openAIObjectWords are the types of their tool_choice object.
var openAIObjectWords = choiceWords{"function": ir.ChoiceTool, "custom": ir.ChoiceTool}

// openAIToolChoice reads an OpenAI tool_choice: a word, or an object
// naming a tool, whose members tab reads.
func (t *Translator) openAIToolChoice(field loc, tab *table) error {
	if s := ir.StrRS(&t.cur); s != nil {
		if m, ok := openAIWords[string(s)]; ok {
			t.req.Choice.Mode = m
			return nil
		}
		return t.invalid(field, "unknown tool_choice %q (use auto, none or required)", s)
	}
	if t.cur.Peek() != '{' {
		return t.invalid(field, "must be a string or an object")
	}
	o, err := t.object(field, tab)
	if err != nil {
		return err
	}
	if openAIObjectWords[string(o.v[sType])] == ir.ChoiceTool && o.v[sName] != nil {
		t.req.Choice = ir.ToolChoice{Mode: ir.ChoiceTool, Name: o.v[sName]}
		return nil
	}
	return t.unsupported(field.at("type"), "tool_choice of type \""+string(o.v[sType])+"\"")
}

// Output format.

// The members of a JSON schema format: chat's json_schema object, a
// Responses text.format.
var schemaBody = entries{
	"name":        str(sName),
	"description": str(sDesc),
	"schema":      {kind: vObj, slot: sSchema},
	"strict":      raw(sStrict),
}

// format sets the output format a record describes, of type typ.
func (t *Translator) format(o *record, typ []byte, field loc) error {
	t.req.Format = ir.OutputFormat{Name: o.v[sName], Description: o.v[sDesc], Schema: o.v[sSchema], Strict: o.v[sStrict]}
	return t.formatType(typ, field)
}

func (t *Translator) formatType(typ []byte, field loc) error {
	f := &t.req.Format
	switch string(typ) {
	case "text":
		f.Kind = ir.FormatText
	case "json_object":
		f.Kind = ir.FormatJSONObject
	case "json_schema":
		if f.Schema == nil {
			return t.invalid(field, "json_schema needs a schema")
		}
		f.Kind = ir.FormatJSONSchema
	default:
		return t.invalid(field, "unknown format type %q (use text, json_object or json_schema)", typ)
	}
	return nil
}

// requestTable is the top-level table of a caller dialect's request.
func requestTable(d dialect.ID) *table {
	switch d {
	case dialect.Chat:
		return chatRequest
	case dialect.Messages:
		return anthropicRequest
	}
	return respRequest
}
