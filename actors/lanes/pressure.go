package lanes

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/messages"
)

// followerStrategy restarts the pressure follower after a panic: it holds
// nothing, and every upstream's reaction to the gateway's own memory
// pressure depends on it taking the next sample.
var followerStrategy = supervise.Restart("admission-pressure")

// pressureFollower is the lanes' subscriber of the resource-pressure
// actor (the composition root subscribes PressurePID): the gateway's own
// memory pressure feeds every upstream's limit, critical halves it at
// once (once per window), high stops growth; a used-up CPU (the
// gateway's, or the machine it shares) makes latency no evidence of a
// provider's queue. The pressure actor only sends; the fan-out to the
// controllers runs here.
type pressureFollower struct{ h *Handle }

func (f *pressureFollower) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *messages.Published[*pressure.State]:
		st := m.Snapshot
		f.h.ObserveCPU(st.CPUSaturated())
		// admission's Pressure is the sampler's Severity: pass it through.
		// A normal sample says nothing new (the controllers only step up
		// on a rise), so it neither replaces the last observation nor
		// costs a message per upstream.
		if st.Severity != pressure.Normal {
			f.h.ObservePressure(st.Severity, st.Reason)
		}
	}
}

// PressurePID is the lanes' pressure follower, for the resource-pressure
// actor's Subscribe: each state it samples arrives as a
// *messages.Published[*internal/pressure.State].
func (h *Handle) PressurePID() *actor.PID { return h.follower }
