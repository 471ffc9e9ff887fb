package transport

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/actors/lanes"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/engines"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/metric"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/upstream"
)

// opsPorts is the gateway as the operator APIs (package ops) see it: it
// implements every port ops declares by reading the gateway's published
// snapshots and the actors' handles at call time, so the API can be
// built in Prepare, before the actors it reads are attached. It is a
// view of Gateway rather than methods on it, so that the ports' method
// names stay out of the Gateway's own set.
type opsPorts Gateway

// newOps builds the operator APIs on g.
func (g *Gateway) newOps() *ops.API {
	p := (*opsPorts)(g)
	return ops.New(ops.Ports{Edge: p, Routing: p, Keys: p, RequestLog: p, Services: p, Reloader: g, Monitor: p,
		Logger: g.log, LogsHeartbeat: logsHeartbeat, DurationBuckets: metric.DurationBuckets})
}

// logsHeartbeat is the interval of heartbeat events on the services logs
// stream (tests shorten it: SetLogsHeartbeat).
var logsHeartbeat = 15 * time.Second

// The edge's guards and writers (ops.Edge): the guards are the edge's
// own (package edge), read when a request arrives, since the edge is
// built after the operator APIs.

func (p *opsPorts) Management(ctx *fasthttp.RequestCtx, rid []byte) bool {
	return p.edge.Management(ctx, rid)
}

func (p *opsPorts) Access(ctx *fasthttp.RequestCtx, rid []byte) bool { return p.edge.Access(ctx, rid) }

func (p *opsPorts) Local(ctx *fasthttp.RequestCtx, rid []byte) bool { return p.edge.Local(ctx, rid) }

func (p *opsPorts) Body(ctx *fasthttp.RequestCtx, rid []byte) bool { return p.edge.Body(ctx, rid) }

func (p *opsPorts) JSON(ctx *fasthttp.RequestCtx) bool {
	return edge.IsJSONMediaType(ctx.Request.Header.ContentType())
}

func (p *opsPorts) Error(ctx *fasthttp.RequestCtx, rid []byte, e *apierror.Error) {
	edge.WriteError(ctx, apierror.OpenAI, string(rid), e)
}

// Stream answers ctx with body as a stream the hang-up watcher and
// shutdown end (opsStream).
func (p *opsPorts) Stream(ctx *fasthttp.RequestCtx, rid []byte, host context.Context, body ops.StreamBody) {
	g := (*Gateway)(p)
	s := &opsStream{g: g, rid: string(rid), ctx: ctx, host: host != nil, body: body}
	var conn net.Conn
	if host == nil {
		conn = ctx.Conn()
	}
	s.token = g.inflight.Register(&s.cancel, uint32(ctx.ConnID()), conn, time.Now())
	if host != nil {
		s.stopCtx = context.AfterFunc(host, s.cancel.Cancel)
	}
	ctx.SetBodyStream(s, -1)
}

// opsStream is the body of an operator stream (the services logs): the
// edge's part (hang-up registration, write deadlines, the panic guard)
// around the content ops writes.
type opsStream struct {
	g       *Gateway
	rid     string
	ctx     *fasthttp.RequestCtx // valid while fasthttp writes the body
	host    bool                 // behind net/http: no connection deadlines
	body    ops.StreamBody
	cancel  upstream.Cancel // cancelled by the hang-up watcher or shutdown
	token   edge.Token
	stopCtx func() bool
	done    bool
}

func (s *opsStream) Read([]byte) (int, error) { return 0, io.EOF }

// SupportsBodyWriteTo makes fasthttp flush after every Write.
func (s *opsStream) SupportsBodyWriteTo() bool { return true }

func (s *opsStream) WriteTo(w io.Writer) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.g.notePanic(edge.Management, s.rid, "stream", p)
			err = edge.ErrStreamPanic
		}
	}()
	return s.body.Stream(s.g.edge.StreamWriter(&edge.DeadlineWriter{}, s.ctx, s.host, w, time.Time{}), s.stopped)
}

// stopped reports that the caller hung up or the gateway is draining.
func (s *opsStream) stopped() bool { return s.cancel.Cancelled() || s.g.edge.Draining() }

// Close closes the content and unregisters; fasthttp calls it once.
func (s *opsStream) Close() error {
	if s.done {
		return nil
	}
	s.done = true
	s.body.Close()
	if s.stopCtx != nil {
		s.stopCtx()
	}
	s.g.inflight.Unregister(s.token)
	return nil
}

// Routing state (ops.Routing).

func (p *opsPorts) Now() time.Time                 { return p.clk.Now() }
func (p *opsPorts) Catalog() *catalog.Catalog      { return p.rc.Load().cat }
func (p *opsPorts) TargetStats() *targets.Snapshot { return p.targets.Snapshot() }
func (p *opsPorts) Quota() *quotaactor.Handle      { return p.qs.quota }
func (p *opsPorts) Ledger() ops.Ledger             { return p.qs.ledger }
func (p *opsPorts) QuotaAware() bool               { return p.qs.aware }
func (p *opsPorts) Threshold() float64             { return p.qs.threshold }

func (p *opsPorts) Target(id int) ops.Target {
	in := p.qs.info.At(id)
	return ops.Target{Conn: in.conn, Model: in.model, Slot: in.slot, Upstream: in.upstream}
}

// The keys actor (ops.Keys).

func (p *opsPorts) Snapshot() *ikeys.Snapshot { return p.ten.Keys() }

func (p *opsPorts) Create(name string, pol tenantpolicy.Policy) (ikeys.Info, string, error) {
	return p.ten.Create(name, pol)
}

func (p *opsPorts) UpdatePolicy(name string, pol tenantpolicy.Policy) (ikeys.Info, error) {
	return p.ten.UpdatePolicy(name, pol)
}

func (p *opsPorts) Rotate(name string) (ikeys.Info, string, error) { return p.ten.Rotate(name) }
func (p *opsPorts) Revoke(name string) (ikeys.Info, error)         { return p.ten.Revoke(name) }

// CheckPolicy holds a key's policy to the rules a config-file tenant's
// is held to (tenants.go).
func (p *opsPorts) CheckPolicy(pol tenantpolicy.Policy) error {
	err := checkModels(p.rc.Load().cat, "", pol.AllowedModels)
	if err == nil {
		err = checkTokenWindows(&pol, p.qs.defOut, "")
	}
	return err
}

// The request log (ops.RequestLog) is the store's: ops reads it through
// these.

func (p *opsPorts) Requests(c context.Context, f store.Filter) (store.Page, error) {
	return p.opts.Store.Requests(c, f)
}

func (p *opsPorts) Usage(c context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	return p.opts.Store.Usage(c, q)
}

func (p *opsPorts) UsageTotal(c context.Context, q store.UsageQuery) (store.UsageRow, error) {
	return p.opts.Store.UsageTotal(c, q)
}

func (p *opsPorts) Refusals(c context.Context, q store.UsageQuery) ([]store.Refusal, error) {
	return p.opts.Store.Refusals(c, q)
}

// Services and engines (ops.Services).

func (p *opsPorts) All() []*services.Handle {
	if p.side == nil || p.side.mgr == nil {
		return nil
	}
	return p.side.mgr.All()
}

func (p *opsPorts) Get(tool string) (*services.Handle, bool) { return p.side.mgr.Get(tool) }

func (p *opsPorts) Engines(capability string) any {
	return (*Gateway)(p).engineViews(engines.Capability(capability))
}

// What the dashboard shows (ops.Monitor).

func (p *opsPorts) Version() string            { return p.opts.Version }
func (p *opsPorts) Started() time.Time         { return p.started }
func (p *opsPorts) Inflight() int64            { return p.metrics.inflight.Load() }
func (p *opsPorts) History() []history.Point   { return p.hist.Points() }
func (p *opsPorts) Lanes() *lanes.Snapshot     { return (*Gateway)(p).adm.Snapshot() }
func (p *opsPorts) ConfigInfo() ops.ConfigInfo { return (*Gateway)(p).ConfigInfo() }
func (p *opsPorts) Windows() []ops.LimitWindow {
	g := (*Gateway)(p)
	return append(g.connectionWindows(), g.tenantWindows()...)
}

// Status is the overall health status, as health computes it.
func (p *opsPorts) Status() string {
	if p.edge.Draining() {
		return "draining"
	}
	overall := "ok"
	for _, s := range p.health {
		if _, st := safeSection(s); statusRank[st] > statusRank[overall] {
			overall = st
		}
	}
	return overall
}

func (p *opsPorts) Admission() (in, pressure map[string]any, sheds map[string]int64) {
	sheds = map[string]int64{}
	ih := p.intake.Ingest()
	for _, r := range ingest.ShedReasons {
		if n := ih.Sheds(r); n > 0 {
			sheds["ingest_"+r.String()] += int64(n)
		}
	}
	in = map[string]any{"inflightBytes": ih.InflightBytes(), "maxInflightBytes": ih.Budget().Bytes,
		"waiting": ih.Waiting(), "queuedBytes": ih.QueuedBytes()}
	if st := p.intake.Pressure().State(); st != nil {
		pressure = map[string]any{"severity": st.Severity.String(), "reason": st.Reason}
	}
	return in, pressure, sheds
}

func (p *opsPorts) Cluster() map[string]any {
	cs := p.cs
	if cs == nil {
		return nil
	}
	return cs.port.Summary()
}
