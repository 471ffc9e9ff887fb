package lanes

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/mockprovider"
)

// What the gate scenarios watch while they run: the gateway's admission
// limits, read black-box from GET /api/monitoring/health as an operator
// would, and the mock's ground truth (in flight and queued per model, as
// exact time integrals). The health JSON is read tolerantly: every numeric
// "currentLimit" anywhere in it is a limit, named by its JSON path, so a
// per-upstream section added later is picked up without changing the
// harness.

// point is one observation.
type point struct {
	at time.Duration // since the scenario's t0
	// limits are every "currentLimit" in the health body, by JSON path
	// (array elements named by their name/id/upstream/... field).
	limits map[string]float64
	// adm is adaptiveAdmission's top-level numbers (activeCost,
	// activeCount, rejectedCount, …).
	adm map[string]float64
	// mock is the mock's counters per watched model.
	mock map[string]mockprovider.Counters
	// rules are the rules of every upstream's last judged phase
	// (lastPhase.rule), which say what set the limit read: a gate that
	// fails on one limit reading names the controller's rule behind it.
	rules []string
}

// observer polls health and the mock every interval until stopped.
type observer struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	pts  []point
}

// observe starts polling r's gateway and mock (models: the mock models to
// record) from t0 every interval.
func (r *rig) observe(t0 time.Time, every time.Duration, models ...string) *observer {
	ob := &observer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ob.done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			p := point{mock: map[string]mockprovider.Counters{}}
			for _, m := range models {
				p.mock[m], _ = r.mock.ModelCounters(m)
			}
			p.at = time.Since(t0)
			p.limits, p.adm, p.rules = r.readHealth()
			ob.mu.Lock()
			ob.pts = append(ob.pts, p)
			ob.mu.Unlock()
			select {
			case <-ob.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return ob
}

// finish stops the observer and returns its points in time order.
func (ob *observer) finish() []point {
	close(ob.stop)
	<-ob.done
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return ob.pts
}

// healthWait bounds one health read. A slow read only delays the next
// (the ticker drops the ticks it missed); one given up on is a point
// without limits, and a smoke check needs at least one with them, so the
// bound is generous: a -race gateway on a loaded machine took more than
// 2 s to answer every read of a short run.
const healthWait = 10 * time.Second

// readHealth reads GET /api/monitoring/health; nil maps when it failed.
func (r *rig) readHealth() (limits, adm map[string]float64, rules []string) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + r.addr + "/api/monitoring/health")
	if err := r.client.DoTimeout(req, resp, healthWait); err != nil || resp.StatusCode() != 200 {
		return nil, nil, nil
	}
	return parseHealth(resp.Body())
}

// parseHealth pulls every currentLimit, adaptiveAdmission's top-level
// numbers and each upstream's last phase rule out of a health body.
func parseHealth(body []byte) (limits, adm map[string]float64, rules []string) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil, nil, nil
	}
	limits, adm = map[string]float64{}, map[string]float64{}
	collectLimits(v, "", limits)
	if top, ok := v.(map[string]any); ok {
		if a, ok := top["adaptiveAdmission"].(map[string]any); ok {
			for k, x := range a {
				if f, ok := x.(float64); ok {
					adm[k] = f
				}
			}
			ups, _ := a["upstreams"].([]any)
			for _, u := range ups {
				m, _ := u.(map[string]any)
				last, _ := m["lastPhase"].(map[string]any)
				if rule, ok := last["rule"].(string); ok {
					rules = append(rules, rule)
				}
			}
		}
	}
	return limits, adm, rules
}

// rulesAtMax are the rules of the first reading where f is largest.
func rulesAtMax(pts []point, f func(point) float64) []string {
	if at := argMax(pts, f); at >= 0 {
		return pts[at].rules
	}
	return nil
}

// argMax is the index of the first point where f is largest (-1: f is
// NaN everywhere).
func argMax(pts []point, f func(point) float64) int {
	v, at := math.NaN(), -1
	for i, p := range pts {
		if l := f(p); !math.IsNaN(l) && (math.IsNaN(v) || l > v) {
			v, at = l, i
		}
	}
	return at
}

// nameKeys label array elements in limit paths, first found wins.
var nameKeys = []string{"name", "id", "upstream", "target", "key", "connection", "model", "tenantKey"}

func collectLimits(v any, path string, out map[string]float64) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if f, ok := c.(float64); ok && k == "currentLimit" {
				out[p] = f
				continue
			}
			collectLimits(c, p, out)
		}
	case []any:
		for i, c := range x {
			label := strconv.Itoa(i)
			if m, ok := c.(map[string]any); ok {
				for _, k := range nameKeys {
					if s, ok := m[k].(string); ok && s != "" {
						label = s
						break
					}
				}
			}
			collectLimits(c, path+"["+label+"]", out)
		}
	}
}

// effectiveLimit is the tightest limit the point reports (for a single
// upstream: the process-wide limit or that upstream's own, whichever is
// lower); NaN when the point has none.
func (p point) effectiveLimit() float64 {
	v := math.NaN()
	for _, l := range p.limits {
		if math.IsNaN(v) || l < v {
			v = l
		}
	}
	return v
}

// limitPaths lists the limit paths seen, sorted.
func limitPaths(pts []point) []string {
	seen := map[string]bool{}
	for _, p := range pts {
		for k := range p.limits {
			seen[k] = true
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// upstreamLimit is the limit of the upstream whose path mentions name
// (case-insensitive), leaving out the top-level adaptiveAdmission limit;
// NaN when the gateway reports none.
func (p point) upstreamLimit(name string) float64 {
	v := math.NaN()
	for k, l := range p.limits {
		if k == "adaptiveAdmission.currentLimit" || !strings.Contains(strings.ToLower(k), strings.ToLower(name)) {
			continue
		}
		if math.IsNaN(v) || l < v {
			v = l
		}
	}
	return v
}

// withLimit drops the points whose health read failed or had no limit.
func withLimit(pts []point) []point {
	var out []point
	for _, p := range pts {
		if !math.IsNaN(p.effectiveLimit()) {
			out = append(out, p)
		}
	}
	return out
}

// between returns the points with from ≤ at < to.
func between(pts []point, from, to time.Duration) []point {
	var out []point
	for _, p := range pts {
		if p.at >= from && p.at < to {
			out = append(out, p)
		}
	}
	return out
}

// meanInflight is the mock's mean in flight and queued for model between
// the first and last of pts (exact, from the integrals); NaN for fewer
// than two points.
func meanInflight(pts []point, model string) (inflight, queued float64) {
	if len(pts) < 2 {
		return math.NaN(), math.NaN()
	}
	a, b := pts[0], pts[len(pts)-1]
	dt := float64(b.at - a.at)
	if dt <= 0 {
		return math.NaN(), math.NaN()
	}
	ca, cb := a.mock[model], b.mock[model]
	return float64(cb.InflightNS-ca.InflightNS) / dt, float64(cb.QueuedNS-ca.QueuedNS) / dt
}

// meanLimit is the mean effective limit over pts (NaN when none).
func meanLimit(pts []point, f func(point) float64) float64 {
	sum, n := 0.0, 0
	for _, p := range pts {
		if v := f(p); !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// maxLimit is the largest effective limit over pts (NaN when none).
func maxLimit(pts []point, f func(point) float64) float64 {
	if at := argMax(pts, f); at >= 0 {
		return f(pts[at])
	}
	return math.NaN()
}

// measuredCost is the admission cost of one request of a scenario whose
// requests all cost the same, and where it came from: the gateway's own
// report (an X-OmniRoute-Admission-Cost answer header, should it send one;
// else activeCost ÷ activeCount in health while such requests are in
// flight, the most common value), else internal/admission's cost function
// applied to the request as the gateway prices it (see estimateCost). The
// harness so follows changes of the cost quanta.
func measuredCost(ss []sample, pts []point, fallback float64) (float64, string) {
	var hdr []float64
	for _, s := range ss {
		if s.cost > 0 {
			hdr = append(hdr, s.cost)
		}
	}
	if len(hdr) > 0 {
		return median(hdr), fmt.Sprintf("X-OmniRoute-Admission-Cost (median of %d answers)", len(hdr))
	}
	count := map[float64]int{}
	for _, p := range pts {
		if n := p.adm["activeCount"]; n >= 1 {
			count[math.Round(100*p.adm["activeCost"]/n)/100]++
		}
	}
	best, bestN := 0.0, 0
	for v, n := range count {
		if n > bestN || n == bestN && v < best {
			best, bestN = v, n
		}
	}
	if bestN >= 3 && best > 0 {
		return best, fmt.Sprintf("health: activeCost ÷ activeCount (%d reads)", bestN)
	}
	return fallback, "internal/admission's cost function (health reported no active cost)"
}

// EstimateCost prices a single-target request of bodyLen bytes with
// internal/admission's default cost function and the features the gateway
// derives from it (input tokens: the body at 4 bytes a token; one
// answer): the harness's fallback when the gateway does not report a
// request's cost.
func EstimateCost(bodyLen int) int64 {
	return admission.DefaultCost().Cost(admission.Features{InputTokens: int64(bodyLen+3) / 4, Fanout: 1})
}

// estimateCost is EstimateCost as a float, for figures.
func estimateCost(bodyLen int) float64 {
	return float64(EstimateCost(bodyLen))
}
