package transport

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/actors/history"
	"github.com/omniroute/gateway/actors/ingest"
	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/actors/lanes"
	ledgeractor "github.com/omniroute/gateway/actors/ledger"
	pressureactor "github.com/omniroute/gateway/actors/pressure"
	quotaactor "github.com/omniroute/gateway/actors/quota"
	"github.com/omniroute/gateway/actors/requestlog"
	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/actors/targets"
	tenantlimitactor "github.com/omniroute/gateway/actors/tenantlimit"
)

// newForTest composes a single-node gateway for the tests inside this
// package, which cannot import actors/gateway (it imports transport): the
// same steps as gateway.New in the same order, without cluster mode. The
// tests outside the package (harness_test.go) use gateway.New itself, so
// a drift between the two shows there.
func newForTest(system *actor.ActorSystem, o Options) (*Gateway, error) {
	a, err := Prepare(system, o)
	if err != nil {
		return nil, err
	}
	if err := testRouting(system, a); err != nil {
		a.Abort()
		return nil, err
	}
	if _, on := a.ClusterConfig(); on {
		a.Abort()
		return nil, errors.New("newForTest composes a single node; test cluster mode through gateway.New (outside this package)")
	}
	a.StartFront()
	g := a.Gateway()
	for _, start := range []func() error{
		func() error { return testTenants(system, a) },
		func() error {
			ph, err := pressureactor.Spawn(system, a.PressureOptions())
			if err != nil {
				return err
			}
			ih, err := ingest.Spawn(system, a.IngestConfig(ph))
			if err != nil {
				ph.Stop()
				return err
			}
			a.AttachAdmission(ph, ih)
			return nil
		},
		func() error {
			h, err := lanes.Spawn(system, a.LanesOptions())
			if err != nil {
				return err
			}
			a.AttachLanes(h)
			return nil
		},
		func() error {
			specs, so := a.ServicesPlan()
			mgr, err := services.Start(system, specs, so)
			if err != nil {
				return err
			}
			return a.AttachServices(mgr)
		},
		func() error {
			h, err := history.Spawn(system, a.HistoryOptions())
			if err != nil {
				return err
			}
			a.AttachHistory(h)
			return nil
		},
	} {
		if err := start(); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

func testRouting(system *actor.ActorSystem, a *Assembly) error {
	p, err := a.PlanRouting()
	if err != nil {
		return err
	}
	ledger, err := ledgeractor.Spawn(system, p.Slots, a.Clock())
	if err != nil {
		return err
	}
	q, err := quotaactor.Spawn(system, p.Conns, a.Clock(), a.QuotaOptions(ledger))
	if err != nil {
		ledger.Stop()
		return err
	}
	t, err := targets.SpawnWith(system, p.Targets, a.Clock(), a.TargetsOptions())
	if err != nil {
		q.Stop()
		ledger.Stop()
		return err
	}
	a.AttachRouting(ledger, q, t)
	return nil
}

func testTenants(system *actor.ActorSystem, a *Assembly) error {
	if err := a.OpenStore(); err != nil {
		return err
	}
	kh, err := keys.Spawn(system, a.KeysOptions())
	if err != nil {
		return err
	}
	lo, err := a.AttachKeys(kh)
	if err != nil {
		return err
	}
	lh, err := tenantlimitactor.Spawn(system, lo)
	if err != nil {
		return err
	}
	a.AttachTenantLimits(lh)
	ro := a.RequestLogOptions()
	lg, err := requestlog.Spawn(system, ro)
	if err != nil {
		return err
	}
	a.AttachRequestLog(lg, ro)
	return nil
}
