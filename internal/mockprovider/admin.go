package mockprovider

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/config"
)

// ServiceName identifies the mock in /_mock/health.
const ServiceName = "omniroute-mockprovider"

// instanceID is random and fixed for the process, so a supervisor can tell
// whether the process answering on a port is the one it started.
var instanceID = func() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("mockprovider: read random instance id: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}()

// InstanceID returns this process's instance id as reported by /_mock/health.
func InstanceID() string { return instanceID }

// Health is the body of GET /_mock/health.
type Health struct {
	Service  string `json:"service"`
	Status   string `json:"status"`
	PID      int    `json:"pid"`
	Instance string `json:"instance"`
	Addr     string `json:"addr,omitempty"`
	// Nonce echoes the supervisor's per-start nonce
	// (config.ServiceNonceEnv), so the gateway that spawned this process
	// can tell it from any other process on the port.
	Nonce string `json:"nonce,omitempty"`
}

// startNonce is the nonce this process was started with, if any.
var startNonce = os.Getenv(config.ServiceNonceEnv)

func (s *Server) admin(ctx *fasthttp.RequestCtx, op string) {
	switch {
	case op == "health" && ctx.IsGet():
		writeJSON(ctx, fasthttp.StatusOK, Health{Service: ServiceName, Status: "ok", PID: os.Getpid(),
			Instance: instanceID, Addr: s.Addr(), Nonce: startNonce})
	case op == "stats" && ctx.IsGet():
		writeJSON(ctx, fasthttp.StatusOK, s.stats())
	case op == "behavior" && ctx.IsGet():
		writeJSON(ctx, fasthttp.StatusOK, s.table.Load().snapshot())
	case op == "behavior" && ctx.IsPost():
		adminPost(ctx, "behavior update", s.SetBehavior, func() any { return s.table.Load().snapshot() })
	case op == "requests" && ctx.IsGet():
		writeJSON(ctx, fasthttp.StatusOK, s.requests.log())
	case op == "quota" && (ctx.IsGet() || ctx.IsPost()):
		s.quotaAdmin(ctx)
	case op == "reset" && ctx.IsPost():
		s.Reset()
		writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	default:
		writeAdminError(ctx, fasthttp.StatusNotFound, "no admin route "+string(ctx.Method())+" /_mock/"+op)
	}
}

// SetBehavior applies an update in process (the admin API's POST
// /_mock/behavior does the same); with AfterMS it is scheduled instead (see
// ScheduleBehavior). A change takes effect for requests that arrive after
// it; what it does to requests already there is in schedule.go.
func (s *Server) SetBehavior(u BehaviorUpdate) error {
	if err := u.Validate(); err != nil {
		return err
	}
	if u.AfterMS > 0 {
		return s.ScheduleBehavior(time.Now().Add(time.Duration(u.AfterMS)*time.Millisecond), u)
	}
	var cur, next *behaviorTable
	for {
		cur = s.table.Load()
		if next = cur.apply(u); s.table.CompareAndSwap(cur, next) {
			break
		}
	}
	s.behaviorChanged(cur, next)
	s.log("mockprovider: behavior updated (default changed: %t, models: %d, replace: %t)", u.Default != nil, len(u.Models), u.Replace)
	return nil
}

// Reset restores the start-up default, drops per-model behaviours and
// zeroes counters, the body log and the request log (live gauges are kept).
func (s *Server) Reset() {
	next := &behaviorTable{def: compile(s.initial), models: map[string]*compiled{}}
	s.behaviorChanged(s.table.Swap(next), next)
	s.requests.reset()
	s.resetStats()
	s.quotaAPIs.reset()
	s.log("mockprovider: reset")
}

// Stats returns the same data as GET /_mock/stats.
func (s *Server) Stats() Stats { return s.stats() }

func (s *Server) serveModelList(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		writeError(ctx, familyOpenAI, errInfo{status: fasthttp.StatusMethodNotAllowed, msg: "mockprovider: /v1/models accepts GET only"})
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	names := []string{"mock-model"}
	for name := range s.table.Load().models {
		if name != "mock-model" {
			names = append(names, name)
		}
	}
	slices.Sort(names[1:])
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	created := time.Now().Unix()
	for _, n := range names {
		list.Data = append(list.Data, model{ID: n, Object: "model", Created: created, OwnedBy: ServiceName})
	}
	writeJSON(ctx, fasthttp.StatusOK, list)
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeAdminError(ctx, fasthttp.StatusInternalServerError, "encode response: "+err.Error())
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(body)
}

// adminPost serves a POST of the admin API that changes a setting: the
// body decoded strictly into a T (what names it in the 400), applied by
// set (its error is the 400), answered with the setting as it now stands.
func adminPost[T any](ctx *fasthttp.RequestCtx, what string, set func(T) error, now func() any) {
	var v T
	if err := strictUnmarshal(ctx.PostBody(), &v); err != nil {
		writeAdminError(ctx, fasthttp.StatusBadRequest, "decode "+what+": "+err.Error())
		return
	}
	if err := set(v); err != nil {
		writeAdminError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, now())
}

func writeAdminError(ctx *fasthttp.RequestCtx, status int, msg string) {
	ctx.SetStatusCode(status)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(appendErrorBody(nil, familyOpenAI, errInfo{status: status, msg: "mockprovider: " + msg}))
}
