package ops

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/transport/edge"
)

// ReloadPath is the management route that re-reads the config file.
const ReloadPath = edge.ReloadPath

// ConfigInfo describes the config in force.
type ConfigInfo struct {
	Version  uint64    `json:"version"`
	Hash     string    `json:"hash"`
	LoadedAt time.Time `json:"loadedAt"`
	Source   string    `json:"source"`
	Models   int       `json:"models"`
	Targets  int       `json:"targets"`
}

// The results of a reload (ReloadResult.Result), the values of the
// omniroute_config_reloads_total metric's result label.
const (
	ReloadOK           = "ok"
	ReloadInvalid      = "invalid"
	ReloadNeedsRestart = "needs_restart"
	ReloadUnreadable   = "unreadable"
)

// ReloadResults lists every result a reload can have.
var ReloadResults = []string{ReloadOK, ReloadInvalid, ReloadNeedsRestart, ReloadUnreadable}

// ReloadResult is the answer of a reload. Applied is false when the
// running config stayed; Errors then lists why, one problem each.
type ReloadResult struct {
	Applied bool   `json:"applied"`
	Result  string `json:"result"`
	// Changed is false when the file's content equals the running one.
	Changed bool       `json:"changed"`
	Config  ConfigInfo `json:"config"`
	Errors  []string   `json:"errors,omitempty"`
	// NeedsRestart lists settings of the new file that differ from the
	// running ones but take effect only at the next start; the rest of
	// the file is in force.
	NeedsRestart []string `json:"needsRestart"`
}

// Reload serves POST /api/config/reload behind the management guard,
// with the forgery rule of state-changing management requests. 200:
// applied (with what needs a restart); 422 invalid_config: the file does
// not validate; 409 config_needs_restart: an earlier reload failed while
// registering new targets with the actors, so only a restart can load a
// config; 503 config_unreadable: the file cannot be read. Errors lists
// every problem.
func (a *API) Reload(ctx *fasthttp.RequestCtx, edgeRID []byte) {
	rid := own(edgeRID)
	if !ctx.IsPost() {
		methodNotAllowed(ctx, rid, "POST")
		return
	}
	if !a.edge.Access(ctx, rid) {
		return
	}
	if !a.edge.Body(ctx, rid) {
		return
	}
	r := a.reload.ReloadConfig()
	status := 200
	out := struct {
		ReloadResult
		Error     *mgmtError `json:"error,omitempty"`
		RequestID string     `json:"requestId,omitempty"`
	}{ReloadResult: r}
	var code apierror.Code
	switch r.Result {
	case ReloadInvalid:
		code = apierror.CodeInvalidConfig
	case ReloadNeedsRestart:
		code = apierror.CodeConfigNeedsRestart
	case ReloadUnreadable:
		code = apierror.CodeConfigUnreadable
	}
	if code != 0 {
		e := apierror.New(code)
		status = e.Status
		out.Error = &mgmtError{Type: apierror.ManagementType(e.Status), Code: e.Code, Message: e.Message}
		out.RequestID = string(rid)
	}
	writeJSON(ctx, status, out)
}

// mgmtError is the error member of a management answer (the shape
// WriteError writes).
type mgmtError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}
