package transport

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/transport/gateway/spawn"
)

// newForTest composes a gateway for the tests inside this package, which
// cannot import transport/gateway (it imports transport): the same two steps
// as gateway.New, Prepare and spawn.All (which does not import transport).
func newForTest(system *actor.ActorSystem, o Options) (*Gateway, error) {
	a, err := Prepare(system, o)
	if err != nil {
		return nil, err
	}
	if err := spawn.All(system, a); err != nil {
		return nil, err
	}
	return a.Gateway(), nil
}

// Transport's Assembly is what spawn composes.
var _ spawn.Assembly = (*Assembly)(nil)
