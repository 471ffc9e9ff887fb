package bench

// Scenarios that other packages provide once their branches are merged.
// Each stays "not available in this build" (listed, never faked) until it
// is wired in. To wire one in, replace its Unavailable with a Run that
// calls the package and hands its report to Runner.External, for example:
//
//	Register(Scenario{
//		Name: "noisy-neighbour", Order: 50, Default: true,
//		Description: "...",
//		Run: func(ctx context.Context, r *Runner, s *report.Scenario) error {
//			cfg := r.Config()
//			rep, err := lanes.RunNoisyNeighbour(ctx, lanes.Options{
//				Gateway: r.Binaries().Gateway, Duration: cfg.Duration, Out: r.OutDir(),
//			})
//			if err != nil {
//				return err
//			}
//			return r.External(s, rep,
//				NewCheck("noisy-b-no-503", "", "admission-on", "Tenant B 503s", Exactly(0), "", []float64{float64(rep.B503)}, ""),
//			)
//		},
//	})
//
// (Options and Report field names above are placeholders: use the merged
// package's.)
func init() {
	lanesReason := "needs bench/lanes from the admission issue (issue 4), not merged in this build"
	// TODO(issue 4): wire bench/lanes RunNoisyNeighbour here.
	Register(Scenario{
		Name: "noisy-neighbour", Order: 50, Default: true, Unavailable: lanesReason,
		Description: "Tenant A bursts to 5× capacity while tenant B runs at 30 %: B sees no 503 and its p99 stays within 1.5× of its unloaded p99.",
	})
	// TODO(issue 4): wire bench/lanes interactive/batch here.
	Register(Scenario{
		Name: "interactive-batch", Order: 51, Default: true, Unavailable: lanesReason,
		Description: "A batch flood with interactive traffic: interactive success ≥ 99.5 %, and batch uses ≥ 90 % of capacity within 2 s once interactive goes idle.",
	})
	// TODO(issue 4): wire bench/lanes 8-target fan-out here.
	Register(Scenario{
		Name: "fanout-lanes", Order: 52, Default: true, Unavailable: lanesReason,
		Description: "Fan-out to 8 targets with 3 saturated and lanes on: the mock never sees a target over its limit; skipped targets are reported.",
	})
	// TODO(issue 4): the 3-target fusion. Needs fusion combos in the
	// gateway's configuration; then add a "fusion3" model next to "fan3"
	// in scenario_fanout.go (3 panel members + judge, non-streaming) and a
	// check "CPU per fusion request / single target ≤ 3.5×", and delete
	// this entry.
	Register(Scenario{
		Name: "fusion", Order: 41, Default: true,
		Unavailable: "needs fusion combos from issue 4 (not merged in this build); the priority combo runs in \"fanout\"",
		Description: "A 3-target fusion (panel of 3 in parallel, then the judge): CPU per request vs a single-target request.",
	})
	// TODO(issue 3): wire bench/largebody Run here.
	Register(Scenario{
		Name: "largebody", Order: 60, Default: true,
		Unavailable: "needs bench/largebody from the ingest issue (issue 3), not merged in this build",
		Description: "200 concurrent 10 MiB uploads under GOMEMLIMIT=512MiB: no OOM, peak RSS ≤ 768 MiB, only admission 503s, every forwarded body byte-exact.",
	})
}
