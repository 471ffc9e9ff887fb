// Package largebody is the large-body memory scenario: it builds and starts
// the real omniroute binary as a child process under a Go memory limit,
// points it at the mock provider (also a child process), fires many
// concurrent uploads of large bodies at it, samples the gateway's resident
// memory from /proc, verifies at the provider that every forwarded body
// arrived byte for byte (SHA-256), and classifies every answer.
//
// The goal it checks (admission issue, anchor G4): 200 concurrent 10 MiB
// uploads under GOMEMLIMIT=512MiB end without an OOM, with peak RSS
// (VmHWM) at most 768 MiB, with only admission 503s besides successes, and
// with every forwarded body byte-exact. Run returns the figures; the
// package's tests run a small smoke version, and BenchmarkFull the full one.
package largebody

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/omniroute/gateway/bench/procs"
	"github.com/omniroute/gateway/bench/procstat"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/ringbuf"
)

// Options configures a run. Zero values take the defaults noted.
type Options struct {
	// Uploads is the number of concurrent uploads (200).
	Uploads int
	// Size is the body size in bytes (10 MiB).
	Size int
	// GoMemLimit is the gateway's GOMEMLIMIT ("512MiB").
	GoMemLimit string
	// Binary is an omniroute binary to run; empty builds one into Dir.
	Binary string
	// Dir holds the binary, the config and the data directory (a temporary
	// directory, removed afterwards, when empty).
	Dir string
	// Env adds or overrides gateway environment variables.
	Env map[string]string
	// ProviderLatency is how long the provider takes to answer each
	// forwarded request (200 ms): admitted bodies stay in memory that long.
	ProviderLatency time.Duration
	// Keys is the number of distinct caller keys the uploads use (4).
	Keys int
	// SampleEvery is the RSS sampling period (10 ms).
	SampleEvery time.Duration
	// Log receives progress lines (nil discards them).
	Log io.Writer
}

// Report is the outcome of a run.
type Report struct {
	Uploads      int    `json:"uploads"`
	Size         int    `json:"sizeBytes"`
	GoMemLimit   string `json:"goMemLimit"`
	Budget       int64  `json:"budgetBytes"`
	BudgetSource string `json:"budgetSource"`
	// Outcomes counts answers by class: "200", "503 <code>/<reason>",
	// "413 <code>", "error: <kind>".
	Outcomes map[string]int `json:"outcomes"`
	// Forwarded bodies the provider received; ByteExact of them matched the
	// uploaded body's SHA-256 and size.
	Forwarded int `json:"forwarded"`
	ByteExact int `json:"byteExact"`
	// Unexpected counts answers that are neither a success nor an
	// admission rejection (503 chat_admission_busy, resource_pressure or
	// admission_*, 413 body_exceeds_budget), and transport errors.
	Unexpected int `json:"unexpected"`
	// MaxRejectLatency is the slowest admission rejection.
	MaxRejectLatency time.Duration `json:"maxRejectLatencyNs"`
	// PeakRSS is the gateway's VmHWM at the end; MaxSampledRSS the largest
	// VmRSS sampled; IdleRSS the VmRSS before the uploads.
	PeakRSS       int64 `json:"peakRssBytes"`
	MaxSampledRSS int64 `json:"maxSampledRssBytes"`
	IdleRSS       int64 `json:"idleRssBytes"`
	// InflightAfter is the gateway's reserved bytes once every answer was in
	// (it must return to 0).
	InflightAfter int64 `json:"inflightBytesAfter"`
	// MaxProviderInflight is the most requests the provider held at once.
	MaxProviderInflight int64 `json:"maxProviderInflight"`
	// Exited reports that the gateway died during the run (an OOM kill or a
	// crash); ExitState describes how.
	Exited    bool          `json:"exited"`
	ExitState string        `json:"exitState,omitempty"`
	Duration  time.Duration `json:"durationNs"`
}

// admissionRejection reports whether an answer is one of admission's: the
// ingest byte budget's, or (with ADAPTIVE_ADMISSION_MODE=enforce) the
// adaptive controller's 503 admission_* codes, such as admission_oversized
// for a body whose cost exceeds the limit while other requests run.
func admissionRejection(status int, code string) bool {
	switch {
	case status == 503 && (code == "chat_admission_busy" || code == "resource_pressure"):
		return true
	case status == 503 && strings.HasPrefix(code, "admission_"):
		return true
	case status == 413 && code == "body_exceeds_budget":
		return true
	}
	return false
}

const model = "largebody"

// Run executes the scenario.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Uploads <= 0 {
		o.Uploads = 200
	}
	if o.Size <= 0 {
		o.Size = 10 << 20
	}
	if o.GoMemLimit == "" {
		o.GoMemLimit = "512MiB"
	}
	if o.ProviderLatency <= 0 {
		o.ProviderLatency = 200 * time.Millisecond
	}
	if o.Keys <= 0 {
		o.Keys = 4
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 10 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	rep := Report{Uploads: o.Uploads, Size: o.Size, GoMemLimit: o.GoMemLimit, Outcomes: map[string]int{}}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "largebody-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	bin := o.Binary
	if bin == "" {
		bin = filepath.Join(o.Dir, "omniroute")
		fmt.Fprintln(o.Log, "building omniroute")
		if err := Build(ctx, bin); err != nil {
			return rep, err
		}
	}

	mock, err := mockprovider.StartProcess(ctx, bin, "mockprovider", "--listen", "127.0.0.1:0", "--quiet")
	if err != nil {
		return rep, err
	}
	defer mock.Stop() //nolint:errcheck
	admin := &mockprovider.Client{BaseURL: "http://" + mock.Addr}
	if err := admin.SetBehavior(mockprovider.BehaviorUpdate{Models: map[string]mockprovider.Behavior{model: {LatencyMS: int(o.ProviderLatency / time.Millisecond)}}}); err != nil {
		return rep, err
	}

	gw, err := startGateway(ctx, bin, o, mock.Addr)
	if err != nil {
		return rep, err
	}
	defer gw.stop()
	if h, err := gw.health(); err == nil {
		rep.Budget, rep.BudgetSource = h.ChatAdmission.MaxInflightBytes, h.ChatAdmission.BudgetSource
	}
	if m, err := procstat.ReadMemory(gw.cmd.Process.Pid); err == nil {
		rep.IdleRSS = m.RSS
	}

	// Sample RSS while the uploads run.
	stopSampling := make(chan struct{})
	sampled := make(chan int64, 1)
	go func() {
		var peak int64
		t := time.NewTicker(o.SampleEvery)
		defer t.Stop()
		for {
			if m, err := procstat.ReadMemory(gw.cmd.Process.Pid); err == nil && m.RSS > peak {
				peak = m.RSS
			}
			select {
			case <-stopSampling:
				sampled <- peak
				return
			case <-t.C:
			}
		}
	}()

	fmt.Fprintf(o.Log, "firing %d uploads of %d bytes at %s (GOMEMLIMIT=%s, budget %d bytes from %s)\n", o.Uploads, o.Size, gw.addr, o.GoMemLimit, rep.Budget, rep.BudgetSource)
	start := time.Now()
	answers := fire(ctx, o, gw.addr)
	rep.Duration = time.Since(start)
	close(stopSampling)
	rep.MaxSampledRSS = <-sampled

	st, err := admin.Stats()
	if err != nil {
		return rep, fmt.Errorf("reading the provider's stats: %w", err)
	}
	rep.MaxProviderInflight = st.Models[model].MaxInflight
	received := map[string]mockprovider.BodyRecord{}
	for _, b := range st.Bodies {
		received[b.Headers["x-request-id"]] = b
	}
	for _, a := range answers {
		rep.Outcomes[a.class()]++
		rec, forwarded := received[a.rid]
		if forwarded {
			rep.Forwarded++
			if rec.Bytes == o.Size && rec.SHA256 == bodySHA(a.seed, o.Size) {
				rep.ByteExact++
			}
		}
		switch {
		case a.err != nil:
			rep.Unexpected++
		case a.status == 200:
			if !forwarded {
				rep.Unexpected++ // a success the provider never saw
			}
		case admissionRejection(a.status, a.code):
			rep.MaxRejectLatency = max(rep.MaxRejectLatency, a.latency)
			if forwarded {
				rep.Unexpected++ // rejected, yet forwarded
			}
		default:
			rep.Unexpected++
		}
	}

	// The ledger must come back to zero once every answer is in.
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := gw.health()
		if err == nil {
			rep.InflightAfter = h.ChatAdmission.InflightBytes
		}
		if (err == nil && rep.InflightAfter == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m, err := procstat.ReadMemory(gw.cmd.Process.Pid); err == nil {
		rep.PeakRSS = m.HWM
	}
	if state := gw.exited(); state != "" {
		rep.Exited, rep.ExitState = true, state
	}
	return rep, nil
}

// Build compiles cmd/omniroute into bin.
func Build(ctx context.Context, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/omniroute/gateway/cmd/omniroute")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("building omniroute: %w: %s", err, out)
	}
	return nil
}

// gateway is the omniroute child process.
type gateway struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	err  error
}

func startGateway(ctx context.Context, bin string, o Options, mockAddr string) (*gateway, error) {
	cfg := fmt.Sprintf(`{
  "providers": {"mock": {"base_url": "http://%s/v1", "apis": ["chat"], "auth": "none", "connections": {"default": {}}}},
  "models": {%q: {"targets": [{"connection": "mock"}]}},
  "auth": {"mode": "loopback", "allow_anonymous": true}
}`, mockAddr, model)
	cfgPath := filepath.Join(o.Dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	env := map[string]string{
		"GOMEMLIMIT":              o.GoMemLimit,
		"OMNIROUTE_CONFIG":        cfgPath,
		"OMNIROUTE_LISTEN":        "127.0.0.1:0",
		"OMNIROUTE_DATA_DIR":      filepath.Join(o.Dir, "data"),
		"OMNIROUTE_TENANT_SECRET": "largebody-scenario-secret",
		"OMNIROUTE_LOG_LEVEL":     "warn",
	}
	for k, v := range o.Env {
		env[k] = v
	}
	cmd := exec.Command(bin, "serve")
	for _, kv := range os.Environ() {
		if !inheritedSetting(kv) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &ringbuf.Tail{Max: 8 << 10}
	cmd.Stderr = stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	g := &gateway{cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "omniroute listening on http://"); ok {
				select {
				case ready <- a:
				default:
				}
			}
		}
	}()
	go func() {
		g.err = cmd.Wait()
		close(g.done)
	}()
	select {
	case g.addr = <-ready:
		return g, nil
	case <-g.done:
		return nil, fmt.Errorf("omniroute exited before listening (%v); stderr: %s", g.err, stderr)
	case <-time.After(30 * time.Second):
		g.stop()
		return nil, fmt.Errorf("omniroute did not start listening within 30 s; stderr: %s", stderr)
	case <-ctx.Done():
		g.stop()
		return nil, ctx.Err()
	}
}

// inheritedSetting reports whether kv is a setting of the caller's shell
// that would change the gateway under test: OMNIROUTE_*, ADAPTIVE_ADMISSION_*
// and the Go runtime's knobs. The scenario sets what it needs itself.
func inheritedSetting(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	switch k {
	case "GOMEMLIMIT", "GOGC", "GOMAXPROCS", "GODEBUG", "HEAP_PRESSURE_THRESHOLD_MB":
		return true
	}
	return strings.HasPrefix(k, "OMNIROUTE_") || strings.HasPrefix(k, "ADAPTIVE_ADMISSION_")
}

// exited describes how the gateway ended, or "" while it runs.
func (g *gateway) exited() string {
	select {
	case <-g.done:
		var ee *exec.ExitError
		if errors.As(g.err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return "killed by " + ws.Signal().String()
			}
			return "exit status " + strconv.Itoa(ee.ExitCode())
		}
		return fmt.Sprint("exited: ", g.err)
	default:
		return ""
	}
}

func (g *gateway) stop() { procs.Terminate(g.cmd, g.done) }

type healthDoc struct {
	ChatAdmission struct {
		InflightBytes    int64  `json:"inflightBytes"`
		MaxInflightBytes int64  `json:"maxInflightBytes"`
		BudgetSource     string `json:"budgetSource"`
	} `json:"chatAdmission"`
}

func (g *gateway) health() (healthDoc, error) {
	var h healthDoc
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + g.addr + "/api/monitoring/health")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// answer is what one upload got back.
type answer struct {
	rid     string
	seed    uint64
	status  int
	code    string
	reason  string
	err     error
	latency time.Duration
}

func (a answer) class() string {
	switch {
	case a.err != nil:
		return "error: " + errorKind(a.err)
	case a.status == 200:
		return "200"
	case a.reason != "":
		return fmt.Sprintf("%d %s/%s", a.status, a.code, a.reason)
	}
	return fmt.Sprintf("%d %s", a.status, a.code)
}

func errorKind(err error) string {
	s := err.Error()
	for _, k := range []string{"connection reset", "broken pipe", "EOF", "timeout", "refused"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	return "other"
}

// fire sends every upload at once and collects the answers.
func fire(ctx context.Context, o Options, addr string) []answer {
	tr := &http.Transport{Proxy: nil, MaxConnsPerHost: 0, MaxIdleConnsPerHost: o.Uploads, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	answers := make([]answer, o.Uploads)
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for i := 0; i < o.Uploads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a := answer{rid: fmt.Sprintf("largebody-%05d", i), seed: uint64(i) + 1}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/chat/completions", newBody(a.seed, o.Size))
			if err != nil {
				a.err = err
				answers[i] = a
				return
			}
			req.ContentLength = int64(o.Size)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", fmt.Sprintf("Bearer largebody-key-%d", i%o.Keys))
			req.Header.Set("X-Request-Id", a.rid)
			<-startGate
			t0 := time.Now()
			resp, err := hc.Do(req)
			a.latency = time.Since(t0)
			if err != nil {
				a.err = err
				answers[i] = a
				return
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			a.status = resp.StatusCode
			if resp.StatusCode != 200 {
				var e struct {
					Error struct{ Code, Reason string }
				}
				_ = json.Unmarshal(b, &e)
				a.code, a.reason = e.Error.Code, e.Error.Reason
			}
			answers[i] = a
		}(i)
	}
	close(startGate)
	wg.Wait()
	return answers
}

// Bodies are generated, not held: a valid chat request whose content is a
// 4 KiB block of letters particular to the upload, repeated.
const (
	bodyPrefix = `{"model":"` + model + `","messages":[{"role":"user","content":"`
	bodySuffix = `"}]}`
)

type body struct {
	block []byte
	size  int
	off   int
}

func newBody(seed uint64, size int) *body {
	r := rand.New(rand.NewPCG(seed, 42))
	block := make([]byte, 4096)
	for i := range block {
		block[i] = 'a' + byte(r.IntN(26))
	}
	return &body{block: block, size: size}
}

func (b *body) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && b.off < b.size {
		var c byte
		switch {
		case b.off < len(bodyPrefix):
			c = bodyPrefix[b.off]
		case b.off >= b.size-len(bodySuffix):
			c = bodySuffix[b.off-(b.size-len(bodySuffix))]
		default:
			// Copy a run of filler at once.
			end := min(b.size-len(bodySuffix), b.off+len(p)-n)
			for b.off < end {
				i := (b.off - len(bodyPrefix)) % len(b.block)
				k := copy(p[n:], b.block[i:min(len(b.block), i+end-b.off)])
				n += k
				b.off += k
			}
			continue
		}
		p[n] = c
		n++
		b.off++
	}
	return n, nil
}

// bodySHA is the SHA-256 of upload seed's body.
func bodySHA(seed uint64, size int) string {
	h := sha256.New()
	_, _ = io.Copy(h, newBody(seed, size))
	return hex.EncodeToString(h.Sum(nil))
}

// Markdown renders the report as a table.
func (r Report) Markdown() string {
	var sb strings.Builder
	mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
	fmt.Fprintf(&sb, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(&sb, "| uploads × size | %d × %s |\n", r.Uploads, mib(int64(r.Size)))
	fmt.Fprintf(&sb, "| GOMEMLIMIT / budget | %s / %s (%s) |\n", r.GoMemLimit, mib(r.Budget), r.BudgetSource)
	fmt.Fprintf(&sb, "| peak RSS (VmHWM) | %s (max sampled VmRSS %s, idle %s) |\n", mib(r.PeakRSS), mib(r.MaxSampledRSS), mib(r.IdleRSS))
	keys := make([]string, 0, len(r.Outcomes))
	for k := range r.Outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&sb, "| answers %s | %d |\n", k, r.Outcomes[k])
	}
	fmt.Fprintf(&sb, "| forwarded / byte-exact | %d / %d |\n", r.Forwarded, r.ByteExact)
	fmt.Fprintf(&sb, "| unexpected answers | %d |\n", r.Unexpected)
	fmt.Fprintf(&sb, "| slowest rejection | %v |\n", r.MaxRejectLatency.Round(time.Millisecond))
	fmt.Fprintf(&sb, "| provider max in flight | %d |\n", r.MaxProviderInflight)
	fmt.Fprintf(&sb, "| reserved bytes after | %d |\n", r.InflightAfter)
	oom := "no"
	if r.Exited {
		oom = "yes: " + r.ExitState
	}
	fmt.Fprintf(&sb, "| gateway died (OOM) | %s |\n", oom)
	fmt.Fprintf(&sb, "| duration | %v |\n", r.Duration.Round(time.Millisecond))
	return sb.String()
}

// Check returns an error listing every goal the report misses: no death,
// peak RSS at most maxRSS, only admission rejections besides successes,
// every forwarded body byte-exact, the ledger back at zero.
func (r Report) Check(maxRSS int64) error {
	var errs []string
	if r.Exited {
		errs = append(errs, "the gateway died: "+r.ExitState)
	}
	if maxRSS > 0 && r.PeakRSS > maxRSS {
		errs = append(errs, fmt.Sprintf("peak RSS %d bytes exceeds %d", r.PeakRSS, maxRSS))
	}
	if r.Unexpected > 0 {
		errs = append(errs, fmt.Sprintf("%d answers were neither a success nor an admission rejection: %v", r.Unexpected, r.Outcomes))
	}
	if r.ByteExact != r.Forwarded {
		errs = append(errs, fmt.Sprintf("%d of %d forwarded bodies differ from what was uploaded", r.Forwarded-r.ByteExact, r.Forwarded))
	}
	if r.InflightAfter != 0 {
		errs = append(errs, fmt.Sprintf("%d bytes still reserved after every answer", r.InflightAfter))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
