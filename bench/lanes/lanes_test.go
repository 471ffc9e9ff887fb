package lanes

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

var (
	full     = flag.Bool("lanes.full", false, "run the full-length admission scenarios (about 90 s) instead of the smoke variant")
	lockstep = flag.Bool("lanes.lockstep", false, "give the mock a fixed latency (completions in waves) instead of ±30% jitter")
	debugLog = flag.Bool("lanes.debug", false, "print the gateway's debug log (each admission phase) to stderr")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *debugLog {
		GatewayLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	testutil.VerifyTestMain(m)
}

// TestScenarios runs the three scenarios (smoke by default; -lanes.full for
// the full run whose figures NOTES.md reports) and fails on any gate that
// applies to the run.
func TestScenarios(t *testing.T) {
	o := Options{Full: *full, Seed: 7, Lockstep: *lockstep}
	if raceEnabled && !o.Full {
		o.Scale = 0.5 // the race detector slows everything ~5×: keep the offered load proportionate
	}
	for _, run := range []struct {
		name string
		f    func(context.Context, Options) (Report, error)
	}{{"noisy-neighbour", RunNoisyNeighbour}, {"batch-flood", RunBatchFlood}, {"fanout", RunFanout}} {
		t.Run(run.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rep, err := run.f(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + rep.String())
			if !rep.OK() {
				t.Fatalf("%s: a gate failed", run.name)
			}
		})
	}
}
