package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/omniroute/gateway/bench/largebody"
	"github.com/omniroute/gateway/bench/report"
)

// largeBodyMaxRSS is the peak-RSS bound for the large-body scenario.
const largeBodyMaxRSS = 768 << 20

func init() {
	Register(Scenario{
		Name: "largebody", Order: 60, Default: true, Run: runLargeBody,
		Description: "Concurrent uploads of large bodies (default 200 × 10 MiB, all sent at once from 4 caller keys) " +
			"to a gateway process under GOMEMLIMIT=512MiB (ingest byte budget 16 MiB), the provider taking 200 ms " +
			"per answer (bench/largebody): the gateway does not die, its peak RSS (VmHWM) stays ≤ 768 MiB, every " +
			"answer is a success or an admission rejection, every forwarded body reaches the provider byte for " +
			"byte (SHA-256), and no budget stays reserved afterwards. Runs once per variant.",
	})
}

func runLargeBody(ctx context.Context, r *Runner, s *report.Scenario) error {
	reports := map[string]largebody.Report{}
	for _, v := range r.cfg.Variants {
		dir, err := os.MkdirTemp(r.work, "largebody-")
		if err != nil {
			return err
		}
		rep, err := largebody.Run(ctx, largebody.Options{
			Uploads: r.cfg.LargeBodyUploads, Size: r.cfg.LargeBodyMiB << 20, GoMemLimit: r.cfg.LargeBodyMemLimit,
			Binary: r.bins.Gateway, Dir: dir, Env: v.Env,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
		reports[v.Name] = rep
		g := GatewayLabel(v.Name)
		r.logf("  %-18s %d × %d MiB: forwarded %d (byte-exact %d), outcomes %v, peak RSS %s MB", g, rep.Uploads, rep.Size>>20,
			rep.Forwarded, rep.ByteExact, rep.Outcomes, report.MB(rep.PeakRSS))
		one := func(x float64) []float64 { return []float64{x} }
		died := 0.0
		note := ""
		if rep.Exited {
			died, note = 1, rep.ExitState
		}
		s.Checks = append(s.Checks,
			NewCheck("largebody-survived", s.Name, v.Name, "Gateway deaths (OOM kill or crash)", Exactly(0), "", one(died), note),
			NewCheck("largebody-peak-rss", s.Name, v.Name, fmt.Sprintf("Peak RSS (VmHWM) under GOMEMLIMIT=%s", rep.GoMemLimit),
				AtMost(largeBodyMaxRSS>>20), "MiB", one(float64(rep.PeakRSS)/(1<<20)), ""),
			NewCheck("largebody-only-admission", s.Name, v.Name, "Answers neither a success nor an admission rejection (incl. transport errors)",
				Exactly(0), "", one(float64(rep.Unexpected)), outcomesText(rep.Outcomes)),
			NewCheck("largebody-byte-exact", s.Name, v.Name, "Forwarded bodies that differ from the upload", Exactly(0), "",
				one(float64(rep.Forwarded-rep.ByteExact)), fmt.Sprintf("%d forwarded", rep.Forwarded)),
			NewCheck("largebody-ledger", s.Name, v.Name, "Ingest bytes still reserved after every answer", Exactly(0), "B",
				one(float64(rep.InflightAfter)), ""),
		)
		s.Figures = append(s.Figures,
			figure(fmt.Sprintf("Uploads of %d MiB, %s", rep.Size>>20, g), "", one(float64(rep.Uploads))),
			figure(fmt.Sprintf("Ingest budget (%s), %s", rep.BudgetSource, g), "MiB", one(float64(rep.Budget)/(1<<20))),
			figure("Forwarded to the provider, "+g, "", one(float64(rep.Forwarded))),
			figure("Provider max in flight, "+g, "", one(float64(rep.MaxProviderInflight))),
			figure("Slowest admission rejection, "+g, "ms", one(float64(rep.MaxRejectLatency.Microseconds())/1000)),
			figure("Idle RSS, "+g, "MiB", one(float64(rep.IdleRSS)/(1<<20))),
			figure("Largest sampled RSS, "+g, "MiB", one(float64(rep.MaxSampledRSS)/(1<<20))),
			figure("Duration, "+g, "s", one(rep.Duration.Seconds())),
		)
		for _, k := range slices.Sorted(maps.Keys(rep.Outcomes)) {
			s.Figures = append(s.Figures, figure(fmt.Sprintf("Answers %s, %s", k, g), "", one(float64(rep.Outcomes[k]))))
		}
	}
	return r.External(s, reports)
}

func outcomesText(m map[string]int) string {
	out := ""
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s × %d", k, m[k])
	}
	return out
}
