package opslayer

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/actors/lanes"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/actors/targets"
	"github.com/omniroute/gateway/internal/apierror"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/transport/edge"
	"github.com/omniroute/gateway/transport/ops"
	"github.com/omniroute/gateway/transport/port"
)

// The ports package ops declares, each a view of the layer (so that the
// ports' method names stay out of Layer's own set).

// edgePort is the edge's guards, error writer and streams (ops.Edge),
// read when a request arrives: the edge is built after the layer.
type edgePort struct{ pipe port.Pipeline }

func (p edgePort) Management(ctx *fasthttp.RequestCtx, rid []byte) bool {
	return p.pipe.Edge().Management(ctx, rid)
}

func (p edgePort) Access(ctx *fasthttp.RequestCtx, rid []byte) bool {
	return p.pipe.Edge().Access(ctx, rid)
}

func (p edgePort) Local(ctx *fasthttp.RequestCtx, rid []byte) bool {
	return p.pipe.Edge().Local(ctx, rid)
}

func (p edgePort) Body(ctx *fasthttp.RequestCtx, rid []byte) bool {
	return p.pipe.Edge().Body(ctx, rid)
}

func (p edgePort) JSON(ctx *fasthttp.RequestCtx) bool {
	return edge.IsJSONMediaType(ctx.Request.Header.ContentType())
}

func (p edgePort) Error(ctx *fasthttp.RequestCtx, rid []byte, e *apierror.Error) {
	edge.WriteError(ctx, apierror.OpenAI, string(rid), e)
}

func (p edgePort) Stream(ctx *fasthttp.RequestCtx, rid []byte, host context.Context, body ops.StreamBody) {
	p.pipe.Edge().Stream(ctx, rid, host, body)
}

// routing is what requests route by (ops.Routing): the config in force
// (the pipeline's reads) and the routing actors' published state.
type routing struct {
	port.Pipeline
	l *Layer
}

func (r routing) Now() time.Time                 { return r.l.clk.Now() }
func (r routing) TargetStats() *targets.Snapshot { return r.l.rt.Targets.Snapshot() }
func (r routing) Quota() *quotaactor.Handle      { return r.l.rt.Quota }
func (r routing) Ledger() ops.Ledger             { return r.l.rt.Ledger }

// keysPort is the keys API (ops.Keys): the tenant layer's (set when the
// root attaches it), with the pipeline's check of a policy against the
// config in force.
type keysPort struct {
	port.Tenants
	port.Pipeline
}

func (k *keysPort) Snapshot() *ikeys.Snapshot { return k.Keys() }

// servicesPort is the supervised services and engines (ops.Services):
// none until the root started them.
type servicesPort struct{ l *Layer }

func (s servicesPort) All() []*services.Handle {
	if s.l.services == nil {
		return nil
	}
	return s.l.services.All()
}

func (s servicesPort) Get(tool string) (*services.Handle, bool) { return s.l.services.Get(tool) }

func (s servicesPort) Engines(capability string) any { return s.l.services.Engines(capability) }

// monitor is what the dashboard shows besides routing (ops.Monitor).
type monitor struct{ l *Layer }

func (m monitor) Version() string            { return m.l.pipe.Version() }
func (m monitor) Started() time.Time         { return m.l.pipe.Started() }
func (m monitor) Inflight() int64            { return m.l.pipe.Inflight() }
func (m monitor) Lanes() *lanes.Snapshot     { return m.l.pipe.Lanes() }
func (m monitor) ConfigInfo() ops.ConfigInfo { return m.l.pipe.ConfigInfo() }
func (m monitor) Status() string             { return m.l.health.status() }

func (m monitor) History() []history.Point {
	if m.l.hist == nil {
		return nil
	}
	return m.l.hist.Points()
}

// Windows are the connections' limited windows, then the tenants'.
func (m monitor) Windows() []ops.LimitWindow {
	out := m.l.pipe.ConnectionWindows()
	if m.l.keys.Tenants == nil {
		return out
	}
	return append(out, m.l.keys.Windows()...)
}

func (m monitor) Admission() (in, pressure map[string]any, sheds map[string]int64) {
	l := m.l
	sheds = map[string]int64{}
	for _, r := range ingest.ShedReasons {
		if n := l.ingest.Sheds(r); n > 0 {
			sheds["ingest_"+r.String()] += int64(n)
		}
	}
	in = map[string]any{"inflightBytes": l.ingest.InflightBytes(), "maxInflightBytes": l.ingest.Budget().Bytes,
		"waiting": l.ingest.Waiting(), "queuedBytes": l.ingest.QueuedBytes()}
	if st := l.pressure.State(); st != nil {
		pressure = map[string]any{"severity": st.Severity.String(), "reason": st.Reason}
	}
	return in, pressure, sheds
}

func (m monitor) Cluster() map[string]any {
	if m.l.rt.Cluster == nil {
		return nil
	}
	return m.l.rt.Cluster.Summary()
}
