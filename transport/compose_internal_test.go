package transport

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/transport/gateway/clusterlayer"
	"github.com/omniroute/gateway/transport/gateway/datadir"
	"github.com/omniroute/gateway/transport/gateway/spawn"
)

// newForTest composes a gateway for the tests inside this package, which
// cannot import transport/gateway (it imports transport): the same steps
// as gateway.New, datadir.Hold, clusterlayer.ShareInstallSecret, Prepare
// and spawn.All (none of which imports transport).
func newForTest(system *actor.ActorSystem, o Options) (*Gateway, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	a, err := datadir.Hold(o.Env.ResolvedDataDir(), o.Store, func(st store.Store) (*Assembly, error) {
		o.Store = st
		if _, err := clusterlayer.ShareInstallSecret(&o.Env); err != nil {
			return nil, err
		}
		return Prepare(system, o)
	})
	if err != nil {
		return nil, err
	}
	if err := spawn.All(system, a); err != nil {
		return nil, err
	}
	return a.Gateway(), nil
}

// Transport's Assembly is what spawn composes; with it the ports
// transport declares are the root's (Tenants, Cluster: an AttachTenants
// or AttachCluster of another type fails to compile here).
var (
	_ spawn.Assembly      = (*Assembly)(nil)
	_ clusterlayer.Port   = Cluster(nil)
	_ *clusterlayer.Share = (*ClusterShare)(nil)
)
