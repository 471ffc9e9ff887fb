package transport_test

import (
	"bytes"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/transport"
)

// TestMetricsPromtool runs Prometheus' own linter over the /metrics output
// of a running gateway after traffic of every kind: success, stream,
// failover, a request error, a service. promtool comes from Debian's
// prometheus package (.ci/run installs it); without it the test fails.
func TestMetricsPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (apt-get install -y prometheus; .ci/run does it): %v", err)
	}
	resetMock(t)
	f := withServices(t, map[string]config.ServiceConfig{
		"svc": svcConfig(svctest.Serve, func(c *config.ServiceConfig) { c.AutoStart = true }),
	})
	g := startGW(t, f, gwOpts{})
	chat := `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`
	for i := 0; i < 3; i++ {
		if r := g.post("/v1/chat/completions", chat); r.status != 200 {
			t.Fatalf("chat: %d %s", r.status, r.body)
		}
	}
	if r := g.post("/v1/chat/completions", `{"model":"echo","stream":true,"messages":[{"role":"user","content":"hi"}]}`); r.status != 200 {
		t.Fatalf("stream: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/messages", `{"model":"claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, "anthropic-version", "2023-06-01"); r.status != 200 {
		t.Fatalf("messages: %d %s", r.status, r.body)
	}
	if r := g.post("/v1/chat/completions", `{"messages":[]}`); r.status != 400 {
		t.Fatalf("missing model: %d %s", r.status, r.body)
	}
	g.get("/v1/models")
	g.get("/api/monitoring/health")

	body := g.get("/metrics").body
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}

	// Every omniroute_ family is in the metric table with its type, and
	// every family of the table is served.
	kinds := transport.MetricKinds()
	served := map[string]bool{}
	help := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			fs := strings.Fields(rest)
			if !strings.HasPrefix(fs[0], "omniroute_") {
				continue
			}
			served[fs[0]] = true
			if kinds[fs[0]] != fs[1] {
				t.Errorf("%s served as %s; the metric table says %q", fs[0], fs[1], kinds[fs[0]])
			}
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, text, _ := strings.Cut(rest, " ")
			help[name] = text
		}
	}
	var missing []string
	for name := range kinds {
		if !served[name] {
			missing = append(missing, name)
		}
		if served[name] && help[name] == "" {
			t.Errorf("%s has no help text", name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("families of the metric table not served: %v", missing)
	}

	// The duration histogram has cumulative le buckets ending in +Inf equal
	// to its count: what histogram_quantile needs.
	re := regexp.MustCompile(`(?m)^omniroute_request_duration_seconds_bucket\{route="chat",le="([^"]+)"\} (\d+)$`)
	var prev uint64
	var les []string
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		n, _ := strconv.ParseUint(m[2], 10, 64)
		if n < prev {
			t.Fatalf("bucket le=%s is %d, below the previous %d: not cumulative", m[1], n, prev)
		}
		prev = n
		les = append(les, m[1])
	}
	if len(les) < 2 || les[len(les)-1] != "+Inf" {
		t.Fatalf("chat duration buckets %v: want le bounds ending in +Inf", les)
	}
	count := regexp.MustCompile(`(?m)^omniroute_request_duration_seconds_count\{route="chat"\} (\d+)$`).FindStringSubmatch(string(body))
	if count == nil || count[1] != strconv.FormatUint(prev, 10) || prev < 4 {
		t.Fatalf("chat duration count %v, +Inf bucket %d: want equal and at least the 4 chat requests", count, prev)
	}
}
