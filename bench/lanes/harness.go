// Package lanes holds the admission scenarios of the load benchmark: a
// noisy neighbour, a batch flood beside interactive traffic, and a fan-out
// to eight targets of which three are saturated. Each Run function starts
// the mock provider (with fixed slots per model) and the gateway in this
// process, drives open-loop Poisson load through real HTTP over loopback,
// takes ground truth from the mock, and returns a Report whose checks are
// the gates.
//
// Options.Full selects the full durations (about 20-40 s per scenario);
// the default is a smoke run of a few seconds, which go test runs.
package lanes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/actorsys"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/transport/gateway"
)

// Options configures a scenario run.
type Options struct {
	// Full runs the full-length scenario; false runs the smoke variant.
	Full bool
	// Seed makes the arrival processes reproducible.
	Seed int64
	// Scale multiplies the offered rates and the mock's slots (1 when 0);
	// the smoke test lowers it under the race detector.
	Scale float64
	// Lockstep gives the provider a fixed latency. By default its latency
	// varies uniformly over ±30% as real answers do; with a fixed one, a
	// saturated provider's completions come in waves and any request that
	// must wait for capacity waits for the next wave.
	Lockstep bool
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Scale <= 0 {
		o.Scale = 1
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Seed == 0 {
		o.Seed = 1
	}
}

// Figure is one measured number.
type Figure struct {
	Name  string
	Value float64
	Unit  string
	// Seeds are the per-seed values of a figure measured on several seeds
	// (Value is their median).
	Seeds []float64 `json:",omitempty"`
}

// Check is one gate. Smoke checks hold in the smoke run too; the others
// (tail-latency ratios) are gates of the full run only, since a few
// seconds on a loaded 2-core runner give too few samples for a p99.
type Check struct {
	Name   string
	OK     bool
	Detail string
	Smoke  bool
	// Value is the measured figure the gate compares (nil when it could not
	// be measured), Goal the gate as text ("≤ 1.5") and Unit its unit, so a
	// report can show the number next to the verdict.
	Value *float64 `json:",omitempty"`
	Goal  string   `json:",omitempty"`
	Unit  string   `json:",omitempty"`
	// Seeds are the per-seed values of a gate measured on several seeds;
	// Value is their median or their worst (the detail says which).
	Seeds []float64 `json:",omitempty"`
}

// Report is a scenario's result.
type Report struct {
	Scenario string
	Full     bool
	// Notes say how the scenario was set up (environment, definitions).
	Notes   []string `json:",omitempty"`
	Figures []Figure
	Checks  []Check
}

// OK reports whether every gate that applies to the run held.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK && (r.Full || c.Smoke) {
			return false
		}
	}
	return true
}

func (r *Report) figure(name string, v float64, unit string) {
	r.Figures = append(r.Figures, Figure{Name: name, Value: v, Unit: unit})
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *Report) check(name string, ok, smoke bool, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, OK: ok, Smoke: smoke, Detail: fmt.Sprintf(format, args...)})
}

// checkv is check with the measured value and the gate as text; a NaN or
// negative-infinite value (not measurable) is left out.
func (r *Report) checkv(name string, value float64, goal, unit string, ok, smoke bool, format string, args ...any) {
	r.check(name, ok, smoke, format, args...)
	c := &r.Checks[len(r.Checks)-1]
	c.Goal, c.Unit = goal, unit
	if !math.IsNaN(value) && !math.IsInf(value, 0) {
		c.Value = &value
	}
}

// String renders the report as a small table.
func (r *Report) String() string {
	var b strings.Builder
	mode := "smoke"
	if r.Full {
		mode = "full"
	}
	fmt.Fprintf(&b, "scenario %s (%s)\n", r.Scenario, mode)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  # %s\n", n)
	}
	for _, f := range r.Figures {
		fmt.Fprintf(&b, "  %-46s %12.2f %s", f.Name, f.Value, f.Unit)
		if len(f.Seeds) > 1 {
			fmt.Fprintf(&b, " [seeds: %s]", seedList(f.Seeds))
		}
		b.WriteByte('\n')
	}
	for _, c := range r.Checks {
		st := "PASS"
		if !c.OK {
			st = "FAIL"
			if !r.Full && !c.Smoke {
				st = "fail (full-run gate)"
			}
		}
		measured := ""
		if c.Goal != "" {
			v := "n/a"
			if c.Value != nil {
				v = trimFloat(*c.Value)
			}
			measured = fmt.Sprintf(" %s %s (goal %s)", v, c.Unit, c.Goal)
		}
		fmt.Fprintf(&b, "  [%s] %s:%s: %s\n", st, c.Name, measured, c.Detail)
	}
	return b.String()
}

// rig is a running mock and gateway.
type rig struct {
	mock    *mockprovider.Server
	gw      *gateway.Gateway
	system  *actor.ActorSystem
	served  chan error
	addr    string
	client  *fasthttp.HostClient
	dataDir string
}

// GatewayLog, when set, receives the gateway's own log (with the
// admission controllers' phases at debug level); nil discards it.
var GatewayLog *slog.Logger

func startRig(file string, env map[string]string, behaviors map[string]mockprovider.Behavior) (*rig, error) {
	return startRigWith(rigSpec{file: file, env: env, behaviors: behaviors})
}

// rigSpec is a rig's configuration: the gateway's config file (MOCK stands
// for the mock's address) and environment, the mock's behaviours, and
// whether the mock keeps its request log (with X-Request-Id, which the
// gateway forwards from the caller) for correlating requests.
type rigSpec struct {
	file       string
	env        map[string]string
	behaviors  map[string]mockprovider.Behavior
	requestLog bool
}

// requestLogMax bounds the mock's request log in the scenarios that keep
// one (their offered load stays far below it).
const requestLogMax = 400_000

func startRigWith(spec rigSpec) (*rig, error) {
	file, env, behaviors := spec.file, spec.env, spec.behaviors
	var mo mockprovider.Options
	if spec.requestLog {
		mo.RequestLog = mockprovider.RequestLogOptions{Max: requestLogMax, Headers: []string{"X-Request-Id"}}
	}
	r := &rig{mock: mockprovider.New(mo)}
	mockAddr, err := r.mock.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if err := r.mock.SetBehavior(mockprovider.BehaviorUpdate{Models: behaviors}); err != nil {
		r.mock.Close()
		return nil, err
	}
	if r.dataDir, err = os.MkdirTemp("", "omniroute-bench-lanes-"); err != nil {
		r.mock.Close()
		return nil, err
	}
	vars := map[string]string{"OMNIROUTE_DATA_DIR": r.dataDir, "OMNIROUTE_TENANT_SECRET": "bench-lanes-secret-0123456789",
		"OMNIROUTE_LOG_LEVEL": "warn"}
	for k, v := range env {
		vars[k] = v
	}
	e, err := config.LoadEnv(vars)
	if err != nil {
		r.close()
		return nil, err
	}
	f, err := config.DecodeFile(strings.NewReader(strings.ReplaceAll(file, "MOCK", mockAddr)))
	if err != nil {
		r.close()
		return nil, err
	}
	r.system = actorsys.New(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	if r.gw, err = gateway.New(r.system, gateway.Options{Env: e, File: f, Logger: GatewayLog}); err != nil {
		r.close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.close()
		return nil, err
	}
	r.addr = ln.Addr().String()
	r.served = make(chan error, 1)
	go func() { r.served <- r.gw.Serve(ln) }()
	r.client = &fasthttp.HostClient{Addr: r.addr, MaxConns: 8192, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		MaxIdleConnDuration: time.Second,
		// A plain dialer: fasthttp's default one starts a process-wide DNS
		// cache cleaner that never stops.
		Dial: func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }}
	return r, nil
}

func (r *rig) close() {
	if r.client != nil {
		r.client.CloseIdleConnections()
	}
	if r.gw != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = r.gw.Shutdown(ctx)
		cancel()
		if r.served != nil {
			<-r.served
		}
	}
	if r.system != nil {
		r.system.Shutdown()
	}
	if r.mock != nil {
		_ = r.mock.Close()
	}
	if r.dataDir != "" {
		_ = os.RemoveAll(r.dataDir)
	}
}

// stream is one open-loop arrival process.
type stream struct {
	name     string
	rate     float64 // arrivals per second
	from, to time.Duration
	path     string
	body     string
	bodyRaw  []byte   // used instead of body when set (large bodies, not copied)
	headers  []string // name, value pairs
	capture  string   // response header to keep
	// timeout is when the client gives up and closes its connection
	// (default: a minute).
	timeout time.Duration
	// tag sends X-Request-Id "<name>-<n>" (the gateway forwards it), so a
	// sample can be matched with the mock's request log.
	tag bool
}

// sample is one request's result.
type sample struct {
	at      time.Duration // start, from the run's t0
	latency time.Duration
	// lag is how late the generator sent it (actual minus scheduled start):
	// a loaded machine shows here first.
	lag    time.Duration
	status int // -1: no answer (timeout or connection error)
	header string
	code   string
	id     string // X-Request-Id sent (tagged streams)
	// timedOut: the client gave up at its timeout.
	timedOut bool
	// retryAfter, shouldRetry and reason are the answer's Retry-After,
	// X-Should-Retry and X-OmniRoute-Reason headers; waitMS is
	// X-OmniRoute-Admission-Wait-Ms (-1: absent).
	retryAfter, shouldRetry, reason string
	waitMS                          int
	// cost is X-OmniRoute-Admission-Cost, should the gateway report a
	// request's admission cost (0: absent).
	cost float64
}

// results holds samples by stream name.
type results struct {
	mu sync.Mutex
	by map[string][]sample
}

func (r *results) add(name string, s sample) {
	r.mu.Lock()
	r.by[name] = append(r.by[name], s)
	r.mu.Unlock()
}

// drive runs the streams from t0 until each one's end and waits for every
// request to finish.
func (r *rig) drive(ctx context.Context, t0 time.Time, seed int64, streams ...stream) *results {
	res := &results{by: map[string][]sample{}}
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func(s stream, rng *rand.Rand) {
			defer wg.Done()
			next := s.from
			for n := 0; ; n++ {
				next += time.Duration(rng.ExpFloat64() / s.rate * float64(time.Second))
				if next >= s.to {
					return
				}
				if d := time.Until(t0.Add(next)); d > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				id := ""
				if s.tag {
					id = s.name + "-" + strconv.Itoa(n)
				}
				wg.Add(1)
				go func(due time.Duration) {
					defer wg.Done()
					res.add(s.name, r.do(t0, due, id, s))
				}(next)
			}
		}(s, rand.New(rand.NewSource(seed+int64(i)*7919)))
	}
	wg.Wait()
	return res
}

// do sends one request of s, due at t0+due, tagged id (when not empty).
func (r *rig) do(t0 time.Time, due time.Duration, id string, s stream) sample {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + r.addr + s.path)
	req.Header.SetContentType("application/json")
	for i := 0; i+1 < len(s.headers); i += 2 {
		req.Header.Set(s.headers[i], s.headers[i+1])
	}
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	if s.bodyRaw != nil {
		req.SetBodyRaw(s.bodyRaw)
	} else {
		req.SetBodyString(s.body)
	}
	timeout := s.timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	start := time.Now()
	err := r.client.DoTimeout(req, resp, timeout)
	out := sample{at: start.Sub(t0), latency: time.Since(start), lag: start.Sub(t0.Add(due)), id: id, waitMS: -1}
	if err != nil {
		out.status = -1
		out.code = err.Error()
		out.timedOut = errors.Is(err, fasthttp.ErrTimeout)
		return out
	}
	out.status = resp.StatusCode()
	if s.capture != "" {
		out.header = string(resp.Header.Peek(s.capture))
	}
	out.retryAfter = string(resp.Header.Peek(fasthttp.HeaderRetryAfter))
	out.shouldRetry = string(resp.Header.Peek("X-Should-Retry"))
	out.reason = string(resp.Header.Peek("X-OmniRoute-Reason"))
	if w := resp.Header.Peek("X-OmniRoute-Admission-Wait-Ms"); len(w) > 0 {
		if n, err := strconv.Atoi(string(w)); err == nil {
			out.waitMS = n
		}
	}
	if c := resp.Header.Peek("X-OmniRoute-Admission-Cost"); len(c) > 0 {
		out.cost, _ = strconv.ParseFloat(string(c), 64)
	}
	if out.status != 200 {
		out.code = errorCode(resp.Body())
	}
	return out
}

// errorCode pulls "code" out of an error body without decoding it all.
func errorCode(b []byte) string {
	const k = `"code":"`
	i := strings.Index(string(b), k)
	if i < 0 {
		return ""
	}
	rest := string(b[i+len(k):])
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// summary describes a set of samples.
type summary struct {
	n, ok         int
	uncoded       int // non-200 answers without an error code
	byStatus      map[int]int
	byCode        map[string]int
	p50, p95, p99 time.Duration
}

// answered counts the requests the gateway answered: a 200, or a refusal
// carrying a machine-readable code. A request with no answer (timeout,
// connection error) or an uncoded failure is not answered.
func (s summary) answered() int {
	n := s.ok
	for st, c := range s.byStatus {
		if st != 200 && st > 0 {
			n += c
		}
	}
	return n - s.uncoded
}

func summarize(ss []sample, keep func(sample) bool) summary {
	s := summary{byStatus: map[int]int{}, byCode: map[string]int{}}
	var lat []time.Duration
	for _, x := range ss {
		if keep != nil && !keep(x) {
			continue
		}
		s.n++
		s.byStatus[x.status]++
		if x.code != "" {
			s.byCode[x.code]++
		} else if x.status > 0 && x.status != 200 {
			s.uncoded++
		}
		if x.status == 200 {
			s.ok++
			lat = append(lat, x.latency)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	s.p50, s.p95, s.p99 = pct(lat, 0.50), pct(lat, 0.95), pct(lat, 0.99)
	return s
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (s summary) successRate() float64 {
	if s.n == 0 {
		return 0
	}
	return float64(s.ok) / float64(s.n)
}

func (s summary) non200() int { return s.n - s.ok }

var errNoSamples = errors.New("the scenario produced no samples; the machine is too slow or the run was cancelled")

// noSuccess is errNoSamples for a calibration whose requests were sent but
// none succeeded, with what they got instead.
func noSuccess(what string, s summary) error {
	return fmt.Errorf("%w: %s: none of %d requests succeeded (statuses %v, codes %v)", errNoSamples, what, s.n, s.byStatus, s.byCode)
}

// phases picks the full or smoke duration.
func phases(o Options, full, smoke time.Duration) time.Duration {
	if o.Full {
		return full
	}
	return smoke
}
