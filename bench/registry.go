package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/omniroute/gateway/bench/report"
)

// Scenario is one benchmark scenario. Each lives in its own
// scenario_<name>.go file and registers itself from init, so a scenario
// built by another package (bench/lanes, bench/largebody) is wired in by
// adding one small file: set Run, drop Unavailable.
type Scenario struct {
	// Name selects the scenario on the command line.
	Name string
	// Description is one paragraph for the report and --list.
	Description string
	// Order sorts the run (passthrough first: later scenarios use the
	// capacity it measures).
	Order int
	// Default puts the scenario in a run that names none.
	Default bool
	// Group is a name that selects this scenario together with the others
	// of its group (e.g. "gates").
	Group string
	// Unavailable says why this build cannot run the scenario; such
	// scenarios are listed in the report as "not available in this build"
	// and never faked.
	Unavailable string
	// Run fills s (cells, idle memory, checks, figures). An error marks the
	// scenario and the run invalid; the other scenarios still run.
	Run func(ctx context.Context, r *Runner, s *report.Scenario) error
}

var registry []Scenario

// Register adds a scenario; names must be unique.
func Register(s Scenario) {
	for _, o := range registry {
		if o.Name == s.Name {
			panic("bench: scenario " + s.Name + " registered twice")
		}
	}
	if (s.Run == nil) == (s.Unavailable == "") {
		panic("bench: scenario " + s.Name + " needs exactly one of Run and Unavailable")
	}
	registry = append(registry, s)
	slices.SortStableFunc(registry, func(a, b Scenario) int { return a.Order - b.Order })
}

// Scenarios returns every registered scenario in run order.
func Scenarios() []Scenario { return slices.Clone(registry) }

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range registry {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// selectScenarios resolves names (empty: the default set) into the
// scenarios to run and the unavailable ones to list.
func selectScenarios(names []string) (run []Scenario, unavailable []report.Unavailable, err error) {
	for _, s := range registry {
		if s.Unavailable != "" {
			unavailable = append(unavailable, report.Unavailable{Name: s.Name, Reason: s.Unavailable})
		}
	}
	if len(names) == 0 {
		for _, s := range registry {
			if s.Default && s.Unavailable == "" {
				run = append(run, s)
			}
		}
		return run, unavailable, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		if members := groupMembers(n); len(members) > 0 {
			for _, m := range members {
				want[m] = true
			}
			continue
		}
		s, ok := Lookup(n)
		if !ok {
			var all []string
			for _, s := range registry {
				all = append(all, s.Name)
			}
			return nil, nil, fmt.Errorf("unknown scenario %q: choose from %s, or a group (%s)", n, strings.Join(all, ", "), strings.Join(groups(), ", "))
		}
		want[s.Name] = true
	}
	for _, s := range registry {
		if want[s.Name] && s.Unavailable == "" {
			run = append(run, s)
		}
	}
	return run, unavailable, nil
}

// groupMembers lists the scenarios of group name (none when it is not a
// group).
func groupMembers(name string) []string {
	var out []string
	for _, s := range registry {
		if s.Group != "" && s.Group == name {
			out = append(out, s.Name)
		}
	}
	return out
}

// groups lists the group names, in run order.
func groups() []string {
	var out []string
	for _, s := range registry {
		if s.Group != "" && !slices.Contains(out, s.Group) {
			out = append(out, s.Group)
		}
	}
	return out
}
