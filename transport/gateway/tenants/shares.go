package tenants

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/actors/supervise"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/messages"
)

// sharesStrategy restarts the shares follower after a panic: it holds
// nothing of its own (what it publishes lives in the holder it is given),
// and without it a key's weight or a grain's budget would stop following
// key changes.
var sharesStrategy = supervise.Restart("tenant-shares")

// sharesFollower is the keys actor's subscriber for admission and the
// cluster: from every snapshot the keys actor publishes it derives the
// tenants' shares (their weights for the ingest queue and the lanes,
// their policies for the cluster's grains; internal/keys.SharesOf) and
// publishes them into out, which the request path reads with one atomic
// load. The keys actor only sends; the derivation runs here. It answers
// the *messages.Sync barrier, so a key operation returns once the
// tenant's new weight is in force.
type sharesFollower struct{ out *atomic.Pointer[ikeys.Shares] }

func (f *sharesFollower) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *messages.Published[*ikeys.Snapshot]:
		f.out.Store(ikeys.SharesOf(m.Snapshot))
	case *messages.Sync:
		ctx.Respond(m)
	}
}

// followShares spawns the shares follower and subscribes it to kh; it
// returns once the shares of the snapshot in force are published, so
// admission starts on them. stop stops it.
func followShares(system *actor.ActorSystem, kh *keys.Handle, out *atomic.Pointer[ikeys.Shares]) (pid *actor.PID, stop func(), err error) {
	produce := func() actor.Actor { return &sharesFollower{out: out} } // a fresh one on every restart
	props := actor.PropsFromProducer(produce, actor.WithGuardian(sharesStrategy))
	pid, err = system.Root.SpawnNamed(props, fmt.Sprintf("tenant-shares-%p", out))
	if err != nil {
		return nil, nil, fmt.Errorf("spawning the tenant shares follower: %w", err)
	}
	stop = func() { _ = system.Root.PoisonFuture(pid).Wait() }
	if err := kh.Subscribe(pid); err != nil {
		stop()
		return nil, nil, fmt.Errorf("cannot start: %w", err)
	}
	// The snapshot in force was sent before Subscribe answered: a barrier
	// behind it.
	if _, err := system.Root.RequestFuture(pid, &messages.Sync{}, 10*time.Second).Result(); err != nil {
		stop()
		return nil, nil, fmt.Errorf("cannot start: the tenant shares follower did not answer: %w", err)
	}
	return pid, stop, nil
}
