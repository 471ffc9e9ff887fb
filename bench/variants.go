package bench

// Variant is one configuration of the gateway under test: the environment
// variables added to its process. Every scenario runs each variant as its
// own gateway process.
type Variant struct {
	Name string
	Env  map[string]string
}

// Variants is the single place that defines what "admission off" and
// "admission on" mean. Variables a build does not know are ignored by the
// gateway, so both variants behave alike until the admission issues (3:
// ingest byte budget, 4: adaptive controller and virtual lanes) are merged.
//
//   - admission-off: the adaptive controller off (its default is shadow,
//     which still keeps accounting); the ingest budget (issue 3) has no off
//     switch and stays at its default.
//   - admission-on: the adaptive controller enforcing, virtual lanes on, the
//     ingest budget at its default.
var Variants = []Variant{
	{Name: "admission-off", Env: map[string]string{
		"ADAPTIVE_ADMISSION_MODE": "off",
	}},
	{Name: "admission-on", Env: map[string]string{
		"ADAPTIVE_ADMISSION_MODE":      "enforce",
		"OMNIROUTE_CHAT_VIRTUAL_LANES": "true",
	}},
}

// throughputGoal is the closed-loop throughput goal (× the
// reference proxy) per variant; variants not listed use the strictest.
var throughputGoal = map[string]float64{
	"admission-off": 0.60,
	"admission-on":  0.55,
}

func throughputGoalOf(variant string) float64 {
	if g, ok := throughputGoal[variant]; ok {
		return g
	}
	return 0.60
}
