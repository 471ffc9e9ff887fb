package bench

import (
	"context"

	"github.com/omniroute/gateway/bench/lanes"
)

// The issue-11 gate scenarios of bench/lanes: an operator's black-box view
// of admission and failover while the provider changes (incidents,
// capacity and latency steps, overload, callers that give up or announce a
// deadline, big requests, many connections, two providers, the noisy
// neighbour with the defaults). Like the other bench/lanes scenarios they
// run the gateway inside the bench process against an in-process mock.
// They are not in the default set (about 18 minutes together in their full
// form, three seeds each); name them, or the group "gates", on the command
// line. --lanes-full picks the full or the smoke form, --lanes-scale
// scales slots and rates.

const gatesEnvText = " Runs in the bench process with ADAPTIVE_ADMISSION_MODE=enforce and OMNIROUTE_CHAT_VIRTUAL_LANES=true " +
	"(every other admission setting at its default) unless it says \"defaults\"; three seeds in the full run " +
	"(--lanes-full): timing gates take the median, invariants the worst seed."

func init() {
	for i, g := range []struct {
		name, desc string
		run        func(context.Context, lanes.Options) (lanes.Report, error)
	}{
		{"incidents", "The only target hangs, answers 429 with Retry-After: 2, or answers 503 for 10 s: traffic flows again " +
			"within max(provider hint, 5 s) of the recovery; also reports the Retry-After values the gateway sent.", lanes.RunIncidents},
		{"capacity-step", "The provider's slots go 32 → 16 → 32: the limit is within 1.2× of the new knee (slots × request cost) " +
			"within 5 windows and stays; after the restore it reaches 0.9× the knee within 10 windows.", lanes.RunCapacityStep},
		{"latency-step", "The provider's latency doubles (200 → 400 ms, 32 slots): from 10 s after the step, throughput ≥ 90 % of " +
			"the new capacity and mean in flight at the provider ≥ 0.9 × its slots.", lanes.RunLatencyStep},
		{"overload-5x-10x", "5× and then 10× the capacity for 20 s each: goodput ≥ 90 % of capacity, success p99 ≤ 2× unloaded, " +
			"every refusal a 429/503 with Retry-After and a reason, refusal p99 ≤ 10 ms.", lanes.RunOverload},
		{"give-up", "Clients that give up after 300 ms offer 3× the capacity: the limit is never above 1.3× the knee; counts the " +
			"requests that reached the provider after their client left.", lanes.RunGiveUp},
		{"deadline", "Every request announces a 1 s deadline (X-Stainless-Timeout, x-omniroute-timeout-ms) at 3× capacity: no " +
			"admission wait longer than the deadline, no request sent upstream after it.", lanes.RunDeadline},
		{"big-requests", "A 1 KiB tenant at 60 % beside a 2 MiB tenant at 20 % of capacity: ≥ 90 % of the 2 MiB requests served, " +
			"the small tenant's p99 within its unloaded p99 + 100 ms.", lanes.RunBigRequests},
		{"coding-agents", "Eight agents send Claude Code-shaped streamed requests (80 KB–1 MB, 25 tools, max_tokens 32000) to a " +
			"provider with eight slots: no admission refusal, ≥ 99 % success, slots ≥ 90 % used.", lanes.RunCodingAgents},
		{"one-tenant-256", "One tenant with 256 connections to a provider that takes them all (20 ms): enforce with the defaults " +
			"serves ≥ 0.95× the admission-off throughput with no refusal.", lanes.RunFanIn},
		{"two-providers", "A round-robin model over a 16-slot and a 48-slot provider at 1.25× their joint capacity, then the small " +
			"one slows 4×: each runs at its own knee, and the slow one does not lower the other's.", lanes.RunTwoProviders},
		{"noisy-neighbour-defaults", "The noisy neighbour with the defaults (only ADAPTIVE_ADMISSION_MODE=enforce): B p99 ≤ 1.5× " +
			"unloaded, B refusals ≤ 0.5 %, A goodput ≥ 90 % of what B leaves.", lanes.RunNoisyNeighbourDefaults},
	} {
		Register(Scenario{Name: g.name, Order: 80 + i, Group: GatesGroup, Description: g.desc + gatesEnvText, Run: lanesScenario(g.run)})
	}
}

// GatesGroup selects every gate scenario on the command line.
const GatesGroup = "gates"
