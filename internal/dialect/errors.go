package dialect

import (
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/sanitize"
)

// ParseError reads an upstream error answer (status and body) of dialect d
// into a dialect-neutral error: the status, the provider's own type and
// code, and its message passed through the redaction path. A body that is
// not the dialect's error shape still gives an error that names the
// status. The result is ready for MapError.
func (d *Dialect) ParseError(status int, body []byte) *apierror.Error {
	e := &apierror.Error{Status: status}
	var msg []byte
	errObj := jsonscan.Get(body, "error")
	if len(errObj) > 0 && errObj[0] == '{' {
		var c jsonscan.Cursor
		c.Reset(errObj)
		c.Object()
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			switch string(k) {
			case "message":
				if t, ok := c.Text(); ok {
					msg = append(msg[:0], t...)
					continue
				}
			case "type":
				if t, ok := c.Text(); ok {
					if d.Family == Anthropic {
						e.AnthropicType = string(t)
					} else {
						e.Type = string(t)
					}
					continue
				}
			case "code":
				if t, ok := c.Text(); ok {
					e.Code = string(t)
					continue
				}
				if n := c.Number(); n != nil { // some providers send numeric codes
					e.Code = string(n)
					continue
				}
			}
			c.Skip()
		}
	} else if t, ok := jsonscan.AppendString(nil, errObj); ok {
		msg = t // {"error": "text"}
	} else if t, ok := textMember(body, "message"); ok {
		msg = t // Mistral's and vLLM's bare {"message": …}
	} else if t, ok := textMember(body, "detail"); ok {
		msg = t // FastAPI servers' {"detail": …}
	}
	fallback := "the upstream provider answered HTTP " + strconv.Itoa(status) + " without a readable " + d.Name + " error body"
	e.Message = sanitize.Message(string(msg), fallback)
	return e
}

func textMember(doc []byte, key string) ([]byte, bool) {
	raw := jsonscan.Get(doc, key)
	if raw == nil {
		return nil, false
	}
	return jsonscan.AppendString(nil, raw)
}

// MapError turns an error parsed from upstream dialect `from` into one the
// caller of dialect d understands. Within a family the provider's type and
// code pass unchanged. Across families the type comes from the status in
// the caller's vocabulary and the provider's own code (or type) becomes
// the machine-readable code, so nothing the provider said is lost.
// Anthropic's 529 (overloaded) becomes 503 for OpenAI-family callers,
// which know no 529; every other status passes unchanged.
func (d *Dialect) MapError(from ID, e *apierror.Error) *apierror.Error {
	out := *e
	if Of(from).Family == d.Family {
		return &out
	}
	if d.Family == Anthropic {
		if out.Code == "" {
			out.Code = out.Type
		}
		out.Type = ""
		out.AnthropicType = apierror.AnthropicType(out.Status)
		return &out
	}
	if out.Code == "" {
		out.Code = out.AnthropicType
	}
	out.AnthropicType = ""
	out.Type = ""
	if out.Status == 529 {
		out.Status = 503
	}
	return &out
}

// AppendError renders e as an error body of dialect d.
func (d *Dialect) AppendError(dst []byte, e *apierror.Error, rid string) []byte {
	return e.Append(dst, d.ErrorFormat, rid)
}
