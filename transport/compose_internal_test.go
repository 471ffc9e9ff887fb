package transport

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/transport/gateway/datadir"
	"github.com/omniroute/gateway/transport/gateway/spawn"
)

// newForTest composes a gateway for the tests inside this package, which
// cannot import transport/gateway (it imports transport): the same three
// steps as gateway.New, datadir.Open, Prepare and spawn.All (neither of
// which imports transport).
func newForTest(system *actor.ActorSystem, o Options) (*Gateway, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	dd, err := datadir.Open(o.Env.ResolvedDataDir(), o.Store)
	if err != nil {
		return nil, err
	}
	o.Store = dd.Store
	a, err := Prepare(system, o)
	if err != nil {
		dd.Close(nil)
		return nil, err
	}
	a.OnClose(func() { dd.Close(a.Logger()) })
	if err := spawn.All(system, a); err != nil {
		return nil, err
	}
	return a.Gateway(), nil
}

// Transport's Assembly is what spawn composes.
var _ spawn.Assembly = (*Assembly)(nil)
