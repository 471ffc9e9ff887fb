// Package fusion is the policy of a fusion model (docs/routing.md
// "Fusion"): the resolved fusion sections, what a panel request goes
// without, how a member's answer text is read, and the judge's request
// built from the caller's body and the panel's answers. It is pure: the
// pipeline (transport) sends the panel and the judge; this package only
// decides what they are sent and reads what they answer, so each rule is
// tested (and fuzzed) without a gateway.
package fusion

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// Model is a resolved fusion section: who judges and how many panel
// answers the judge needs.
type Model struct {
	quorum int // 0 = majority of the panel
	// JudgeModel is the model whose targets judge; JudgeTarget a target of
	// the fusion model itself. Neither: the first member that answered.
	JudgeModel  *catalog.Model
	JudgeTarget *catalog.Target
	// Prompt is the judge's template, {{answers}} replaced by JudgePrompt.
	Prompt string
}

// Quorum is how many of a panel of n members must answer: the configured
// quorum (at most n), else a majority.
func (m *Model) Quorum(n int) int {
	q := m.quorum
	if q == 0 {
		q = (n + 1) / 2
	}
	return min(q, n)
}

// Build resolves the fusion sections of f's models, by model index in cat
// (nil for a model that is not a fusion). A judge naming neither a model
// nor one of the model's targets is an error naming the setting to fix.
func Build(f *config.File, cat *catalog.Catalog) ([]*Model, error) {
	out := make([]*Model, len(cat.Models))
	for _, m := range cat.Models {
		if m.Strategy != config.StrategyFusion {
			continue
		}
		fc := f.Models[m.Name].Fusion
		fm := &Model{Prompt: fc.EffectivePrompt()}
		if fc != nil {
			fm.quorum = fc.Quorum
			if fc.Judge != "" {
				if jm := cat.Model([]byte(fc.Judge)); jm != nil {
					fm.JudgeModel = jm
				} else {
					for _, t := range m.Targets {
						if t.Name == fc.Judge {
							fm.JudgeTarget = t
						}
					}
					if fm.JudgeTarget == nil {
						return nil, fmt.Errorf("models.%s.fusion.judge: %q is neither a model nor a target of this model", m.Name, fc.Judge)
					}
				}
			}
		}
		out[m.Index] = fm
	}
	return out, nil
}

// PanelDrop lists the members a panel request goes without: panel answers
// are collected whole (no stream) and must be text (no tools), as in
// OmniRoute.
func PanelDrop(k []byte) bool {
	switch string(k) {
	case "stream", "stream_options", "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls":
		return true
	}
	return false
}

// Answer extracts the text of a non-streaming answer on surface s.
func Answer(s catalog.Surface, body []byte) (string, bool) {
	// Read only the answer text with the scanner: decoding whole answers
	// with encoding/json cost fusion a sixth of its CPU.
	var out []byte
	texts := func(parts []byte, partType string) bool {
		return jsonscan.Elements(parts, func(p []byte) bool {
			if partType == "" || jsonscan.IsString(jsonscan.Get(p, "type"), partType) {
				out, _ = jsonscan.AppendString(out, jsonscan.Get(p, "text"))
			}
			return true
		})
	}
	switch s {
	case catalog.Chat:
		jsonscan.Elements(jsonscan.Get(body, "choices"), func(c []byte) bool {
			content := jsonscan.Get(c, "message", "content")
			if o, ok := jsonscan.AppendString(out, content); ok {
				out = o
			} else {
				texts(content, "")
			}
			return false // the first choice
		})
	case catalog.Messages:
		texts(jsonscan.Get(body, "content"), "text")
	case catalog.Responses:
		jsonscan.Elements(jsonscan.Get(body, "output"), func(o []byte) bool {
			if jsonscan.IsString(jsonscan.Get(o, "type"), "message") {
				texts(jsonscan.Get(o, "content"), "output_text")
			}
			return true
		})
	}
	if len(out) == 0 {
		return "", false
	}
	return string(out), true
}

// JudgePrompt fills the template's {{answers}} with the numbered answers.
func JudgePrompt(template string, answers []string) string {
	var b strings.Builder
	for i, a := range answers {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("Answer ")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(":\n")
		b.WriteString(a)
	}
	return strings.ReplaceAll(template, "{{answers}}", b.String())
}

// ErrJudgeShape is the caller's body without a conversation the judge's
// message can be appended to.
var ErrJudgeShape = errors.New(`the conversation ("messages", or "input" on ` + dia.RouteResponses + `) must be an array or, for "input", a string`)

// JudgeBody appends the judge request for surface s: the caller's body with
// one more user message carrying prompt, appended to "messages" (or to
// "input" on the Responses API, turning a string input into a message
// list). Every other member keeps its bytes, so the judge answers in the
// form the caller asked for (stream, tools, sampling settings).
func JudgeBody(dst []byte, s catalog.Surface, body []byte, prompt string) ([]byte, error) {
	field := "messages"
	if s == catalog.Responses {
		field = "input"
	}
	vs, ve := -1, -1
	err := jsonscan.Members(body, func(m jsonscan.Member) error {
		if string(m.Key) == field {
			vs, ve = m.ValueStart, m.End // the last one wins, as in upstream parsers
		}
		return nil
	})
	if err != nil {
		return dst, err
	}
	msg := append([]byte(`{"role":"user","content":`), apierror.AppendString(nil, prompt)...)
	msg = append(msg, '}')
	if vs < 0 {
		// No conversation at all (a Responses call continuing a stored
		// one, say): add it before the closing brace.
		end := bytes.LastIndexByte(body, '}')
		open := bytes.IndexByte(body, '{')
		dst = append(dst, body[:end]...)
		if len(bytes.TrimSpace(body[open+1:end])) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, field...)
		dst = append(dst, `":[`...)
		dst = append(dst, msg...)
		dst = append(dst, ']')
		return append(dst, body[end:]...), nil
	}
	v := body[vs:ve]
	switch {
	case v[0] == '[':
		dst = append(dst, body[:ve-1]...)
		if len(bytes.TrimSpace(v[1:len(v)-1])) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, msg...)
	case v[0] == '"' && s == catalog.Responses:
		dst = append(dst, body[:vs]...)
		dst = append(dst, `[{"role":"user","content":`...)
		dst = append(dst, v...)
		dst = append(dst, "},"...)
		dst = append(dst, msg...)
	default:
		return dst, ErrJudgeShape
	}
	dst = append(dst, ']')
	return append(dst, body[ve:]...), nil
}
