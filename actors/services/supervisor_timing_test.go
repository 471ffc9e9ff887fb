package services

import (
	"context"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/internal/testutil"
)

// BenchmarkStartStop measures one start (spawn, first passing health
// check) plus one stop (SIGTERM to the group, exit) of a real child.
// Run without -race: a race-enabled child starts several times slower.
func BenchmarkStartStop(b *testing.B) {
	specs, err := FromConfig(map[string]config.ServiceConfig{"api": svc(svctest.Serve, nil)}, BuildOptions{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	system := testutil.ActorSystem(b)
	m, err := Start(system, specs, Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	h, _ := m.Get("api")
	ctx := context.Background()
	var toHealthy time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if st, err := h.Start(ctx); err != nil || st.State != Running {
			b.Fatalf("start: %v %+v", err, st)
		}
		toHealthy += time.Since(t0)
		if st, err := h.Stop(ctx); err != nil || st.State != Stopped {
			b.Fatalf("stop: %v %+v", err, st)
		}
	}
	b.ReportMetric(float64(toHealthy.Microseconds())/float64(b.N)/1000, "ms-to-healthy/op")
}
