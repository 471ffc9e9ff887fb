package bench

import "fmt"

// Variant is one configuration of the gateway under test: the environment
// variables added to its process. Every scenario runs each variant as its
// own gateway process.
type Variant struct {
	Name string
	Env  map[string]string
	// Description says what the variant turns on and off, for the report.
	Description string
}

// Variants is the single place that defines what "admission off" and
// "admission on" mean (the issue: "the gateway with admission off and with
// both admission systems and lanes on"). The two admission systems are the
// ingest byte budget (actors/ingest) and the adaptive controller
// (actors/lanes); every other setting stays at its default, which is what a
// user who turns admission on gets.
//
//   - admission-off: the adaptive controller off (its default is shadow,
//     which still does the accounting). The ingest byte budget has no off
//     switch: it stays on at its default, derived from the machine's memory
//     (OMNIROUTE_CHAT_* in the README); the benchmark's small bodies are
//     below its heavy threshold, so it costs them two atomic loads.
//   - admission-on: the adaptive controller enforcing, virtual lanes on, the
//     ingest byte budget at its default.
var Variants = []Variant{
	{Name: "admission-off", Env: map[string]string{
		"ADAPTIVE_ADMISSION_MODE": "off",
	}, Description: "adaptive admission off; the ingest byte budget stays on at its default (it has no off switch)"},
	{Name: "admission-on", Env: map[string]string{
		"ADAPTIVE_ADMISSION_MODE":      "enforce",
		"OMNIROUTE_CHAT_VIRTUAL_LANES": "true",
	}, Description: "both admission systems on: the adaptive controller enforcing (default limits) with virtual lanes, and the ingest byte budget at its default"},
}

// OptionalVariants run only when named with --variants. request-log-off
// is admission-off without the request log: run against admission-off
// (whose request log writes to the database, the gateway's default), it
// measures what the log costs (issue 14: passthrough with the log on at
// least 0.95× the log off).
var OptionalVariants = []Variant{
	{Name: "request-log-off", Env: map[string]string{
		"ADAPTIVE_ADMISSION_MODE": "off",
		"OMNIROUTE_REQUEST_LOG":   "off",
	}, Description: "admission-off with the request log off (OMNIROUTE_REQUEST_LOG=off); admission-off logs every request to the database, the default"},
}

// VariantsNamed returns the variants with the given names, from Variants
// and OptionalVariants, in the order given.
func VariantsNamed(names []string) ([]Variant, error) {
	var out []Variant
	for _, n := range names {
		found := false
		for _, v := range append(append([]Variant(nil), Variants...), OptionalVariants...) {
			if v.Name == n {
				out, found = append(out, v), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown variant %q; the variants are admission-off, admission-on and request-log-off", n)
		}
	}
	return out, nil
}

// throughputGoal is the closed-loop throughput goal (× the
// reference proxy) per variant; variants not listed use the strictest.
var throughputGoal = map[string]float64{
	"admission-off": 0.60,
	"admission-on":  0.55,
	// request-log-off: admission-off less the request log.
	"request-log-off": 0.60,
}

func throughputGoalOf(variant string) float64 {
	if g, ok := throughputGoal[variant]; ok {
		return g
	}
	return 0.60
}
