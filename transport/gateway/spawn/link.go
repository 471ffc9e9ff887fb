package spawn

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/messages"
)

// observationsLink is the targets actor's observation subscriber: each
// attempt's rate-limit headers (a *messages.QuotaObserved, by target id)
// go to the quota actor of the target's connection, under its upstream
// model's name, and to the ledger slot of that model, which learns the
// provider's limits from them. The targets actor only sends; the lookup
// and the hand-over run here, on the link's own goroutine. It holds no
// state (the route is the front end's table, QuotaRoute), so protoactor's
// default strategy, a restart on a panic, is all it needs.
type observationsLink struct {
	route  func(target int) (conn int, upstream string, slot int)
	quota  *quotaactor.Handle
	ledger *ledgeractor.Handle
}

func (l *observationsLink) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *messages.QuotaObserved:
		conn, upstream, slot := l.route(m.Target)
		l.quota.Observe(conn, upstream, m.Obs)
		l.ledger.ObserveLimits(slot, m.Obs)
	}
}

// spawnObservations spawns the link between the routing actors; route
// says where a target's headers go (Assembly.QuotaRoute).
func spawnObservations(system *actor.ActorSystem, route func(int) (int, string, int), q *quotaactor.Handle, l *ledgeractor.Handle) (*actor.PID, error) {
	produce := func() actor.Actor { return &observationsLink{route: route, quota: q, ledger: l} } // a fresh one on every restart
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(produce), fmt.Sprintf("observations-%p", q))
	if err != nil {
		return nil, fmt.Errorf("spawning the observations link: %w", err)
	}
	return pid, nil
}
