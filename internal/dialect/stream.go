package dialect

import (
	"bytes"
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/sse"
)

var (
	doneData   = []byte("[DONE]")
	errorKey   = []byte(`"error"`)
	roleKey    = []byte(`"role"`)
	toolsKey   = []byte(`"tool_calls"`)
	contentKey = []byte(`"content":`)
)

// DoneFrame is the chat stream's terminal frame.
var DoneFrame = []byte("data: [DONE]\n\n")

func named(names []string, name []byte) bool {
	for _, n := range names {
		if n == string(name) {
			return true
		}
	}
	return false
}

// IsTerminal reports the event that completes a stream.
func (d *Dialect) IsTerminal(ev *sse.Event) bool {
	if d.DoneSentinel && bytes.Equal(bytes.TrimSpace(ev.Data), doneData) {
		return true
	}
	return named(d.Terminal, ev.Name)
}

// IsError reports an error the provider sent in-band.
func (d *Dialect) IsError(ev *sse.Event) bool {
	if !d.NamedEvents {
		return bytes.Contains(ev.Data, errorKey) && jsonscan.HasTopLevelKey(ev.Data, "error")
	}
	return named(d.ErrorEvents, ev.Name)
}

// IsStartup reports a content-free opening event that may be held back.
// A chat stream opens with a role-only delta.
func (d *Dialect) IsStartup(ev *sse.Event) bool {
	if !d.NamedEvents {
		data := ev.Data
		return bytes.Contains(data, roleKey) && !bytes.Contains(data, toolsKey) && !hasNonEmptyContent(data)
	}
	return named(d.Startup, ev.Name)
}

// IsUsage reports an event that may carry a usage report.
func (d *Dialect) IsUsage(ev *sse.Event) bool {
	if !d.NamedEvents {
		return bytes.Contains(ev.Data, usageKey)
	}
	return named(d.UsageEvents, ev.Name)
}

// AnnouncesID reports the event that carries the response id the
// dialect's interrupt frame repeats (IDEvent).
func (d *Dialect) AnnouncesID(ev *sse.Event) bool {
	return d.IDEvent != "" && string(ev.Name) == d.IDEvent
}

// hasNonEmptyContent reports a "content" value that is a non-empty string.
func hasNonEmptyContent(d []byte) bool {
	for {
		i := bytes.Index(d, contentKey)
		if i < 0 {
			return false
		}
		d = bytes.TrimLeft(d[i+len(contentKey):], " \t")
		if len(d) > 0 && d[0] == '"' && len(d) > 1 && d[1] != '"' {
			return true
		}
	}
}

// StreamPosition is what an interrupt frame needs to know about the stream
// it ends: how many events the caller has seen (Responses events carry a
// running sequence_number) and the response id they announced.
type StreamPosition struct {
	Seq        int
	ResponseID []byte // the id as the caller saw it, without quotes
}

// AppendInterrupt appends the in-band error frame(s) that end a stream
// broken after its first byte, in the form the dialect's SDKs report as an
// error: a chat data object with a top-level "error" and no [DONE]; an
// Anthropic "event: error"; a Responses "error" event followed by
// "response.failed". rid is the gateway's request id.
func (d *Dialect) AppendInterrupt(dst []byte, e *apierror.Error, rid string, pos StreamPosition) []byte {
	switch d.ID {
	case Chat:
		dst = append(dst, "data: "...)
		dst = e.Append(dst, apierror.OpenAI, "")
		return append(dst, "\n\n"...)
	case Messages:
		dst = append(dst, "event: error\ndata: "...)
		dst = e.Append(dst, apierror.Anthropic, rid)
		return append(dst, "\n\n"...)
	case Responses:
	default:
		return dst // a dialect that does not stream has no frame
	}
	code := e.Code
	if code == "" {
		code = "server_error"
	}
	dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"code\":"...)
	dst = apierror.AppendString(dst, code)
	dst = append(dst, ",\"message\":"...)
	dst = apierror.AppendString(dst, e.Message)
	dst = append(dst, ",\"param\":null,\"sequence_number\":"...)
	dst = strconv.AppendInt(dst, int64(pos.Seq), 10)
	dst = append(dst, "}\n\nevent: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":"...)
	dst = strconv.AppendInt(dst, int64(pos.Seq+1), 10)
	dst = append(dst, ",\"response\":{\"id\":"...)
	dst = apierror.AppendString(dst, pos.ResponseID)
	dst = append(dst, ",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":"...)
	dst = apierror.AppendString(dst, e.Message)
	return append(dst, "}}}\n\n"...)
}
