package transport_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/omniroute/gateway/internal/testutil/browsertest"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/internal/testutil"
)

// screenshotDir is where the browser test saves what it saw (README:
// "Dashboard"); git ignores it, CI keeps it as an artifact.
const screenshotDir = "../artifacts/screenshots"

// chromiumPath and openBrowser: internal/testutil/browsertest, shared
// with the cluster's page test.
func chromiumPath(t *testing.T) string { return browsertest.ChromiumPath(t) }

type browser = browsertest.Browser

func openBrowser(t *testing.T, exe string) *browser { return browsertest.Open(t, exe, screenshotDir) }

// TestDashboardInBrowser loads the dashboard in headless Chromium against
// a real gateway, the mock provider and a supervised child process under
// scripted load, and checks what an operator would look for: the limit
// chart has points, a burst shows a lane with a queue, a cooling target
// shows its reason and end time, a request error shows with its code, and
// the stop button stops the child process. Screenshots go to
// artifacts/screenshots/.
func TestDashboardInBrowser(t *testing.T) {
	exe := chromiumPath(t)
	resetMock(t)
	f := testFile(t, `,
    "burst": {"targets": [{"connection": "mock/a", "model": "m-dash-burst"}]},
    "cool": {"targets": [{"connection": "mock/b", "model": "m-dash-cool"}]}`)
	f.Services = map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, func(c *config.ServiceConfig) { c.AutoStart = true })}
	g := startGW(t, f, gwOpts{env: enforceEnv("OMNIROUTE_CHAT_VIRTUAL_LANES", "1", "ADAPTIVE_ADMISSION_MAX_WAIT_MS", "8000",
		"ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT", "8")})
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-dash-burst": {LatencyMS: 4000},
		"m-dash-cool":  {Fail: mockprovider.FailSpec{Mode: "status", Status: 429, RetryAfter: "120", Times: 1}},
	})
	b := openBrowser(t, exe)
	ctx, waitJS, shot := b.Ctx, b.WaitJS, b.Shot

	if err := chromedp.Do(ctx, chromedp.Navigate(g.base+"/dashboard")); err != nil {
		t.Fatal(err)
	}
	// The chart draws one point a second from the history ring.
	waitJS("the limit chart has points", `Number(document.getElementById("limit-chart").dataset.points) >= 3`)
	waitJS("the status badge", `document.getElementById("status").textContent === "ok"`)
	// The config in force: version 1 (start-up), its hash and load time.
	waitJS("the config version", `/^config v1 [0-9a-f]{12} loaded \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/.test(document.getElementById("config").textContent)`)

	// A burst: one request holds the only place of the upstream, others
	// from distinct tenants queue in their lanes.
	body := `{"model":"burst","messages":[{"role":"user","content":"hi"}]}`
	done := make(chan response, 4)
	go func() { done <- g.post("/v1/chat/completions", body, "Authorization", "Bearer burst-holder-key") }()
	waitFor(t, "the burst holder in flight", func() bool { return g.admissionNumber("activeCount") >= 1 })
	for i := 0; i < 3; i++ {
		key := fmt.Sprintf("Bearer burst-lane-key-%d", i)
		go func() { done <- g.post("/v1/chat/completions", body, "Authorization", key) }()
	}
	waitJS("a lane with a queue", `[...document.querySelectorAll("#lanes tbody tr")].some(r => r.cells.length === 4 && r.cells[0].textContent === "mock/a/m-dash-burst" && Number(r.cells[2].textContent) >= 1)`)
	waitJS("the chart shows queued cost", `document.getElementById("adm-queued").textContent !== "0" && document.getElementById("adm-queued").textContent !== "–"`)
	shot("admission-burst")

	// A cooling target: the provider answered 429 with Retry-After: 120.
	if r := g.post("/v1/chat/completions", `{"model":"cool","messages":[]}`); r.status != 429 {
		t.Fatalf("cooling target answered %d %s", r.status, r.body)
	}
	waitJS("the cooling target's reason and end time", `(() => {
		const r = document.querySelector('#providers-table tr[data-target="mock/b/m-dash-cool"]');
		return !!r && r.querySelector(".reason").textContent === "rate_limit" && /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/.test(r.querySelector(".until").textContent);
	})()`)
	shot("providers-cooling")

	// A request error shows in the requests panel with its code: the
	// cooling model's next request is refused by routing.
	r := g.post("/v1/chat/completions", `{"model":"cool","messages":[]}`, "X-Request-Id", "dash-error-request")
	if r.status != 429 {
		t.Fatalf("the cooling model: %d %s", r.status, r.body)
	}
	waitJS("the error request in the requests panel", `(() => {
		const r = document.querySelector('#requests-table tr[data-request-id="dash-error-request"]');
		return !!r && r.querySelector(".status").textContent === "429" && r.querySelector(".code").textContent === "targets_exhausted";
	})()`)
	// A request refused before routing (an unknown model) is no record
	// of its own: it is counted in today's refusals above the usage.
	if r := g.post("/v1/chat/completions", `{"model":"no-such-model","messages":[]}`); r.status != 404 {
		t.Fatalf("unknown model: %d %s", r.status, r.body)
	}
	waitFor(t, "the refusal committed", func() bool {
		return strings.Contains(string(g.get("/api/usage").body), `"code":"model_not_found"`)
	})
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#req-filter button[type="submit"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS("the refusal counted above the usage", `document.getElementById("usage-refused").textContent.includes("model_not_found ×1")`)
	shot("requests")

	// Stop the service from the page: the child process goes away.
	st := decodeStatus(t, g.get("/api/services/svc/status"))
	if st.State != "running" || st.PID == nil {
		t.Fatalf("service before stop: %+v", st)
	}
	pid := *st.PID
	waitJS("the service row with its pid", `(() => { const r = document.querySelector('#services-table tr[data-service="svc"]'); return !!r && r.querySelector(".pid").textContent === "`+strconv.Itoa(pid)+`"; })()`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#services-table tr[data-service="svc"] button[data-action="stop"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS("the page shows the service stopped", `(() => { const r = document.querySelector('#services-table tr[data-service="svc"]'); return !!r && r.querySelector(".state").textContent === "stopped"; })()`)
	deadline := time.Now().Add(10 * time.Second)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the stop button left pid %d running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	shot("services-stopped")

	for i := 0; i < 4; i++ {
		<-done
	}
	b.Close()
	if !strings.HasPrefix(g.base, "http://127.0.0.1:") {
		t.Fatalf("the gateway must listen on loopback: %s", g.base)
	}
}

// TestDashboardLimitChartFollowsCapacity: under steady load on a mock
// model with 8 slots the limit the chart plots grows to the knee; when the
// mock's capacity drops to 2 slots at run time (its admin API), the chart's
// newest limit points fall to at most half of the peak it showed before.
// The page's own data (the canvas's data-limits, what it drew) is
// asserted, not the API.
func TestDashboardLimitChartFollowsCapacity(t *testing.T) {
	exe := chromiumPath(t)
	resetMock(t)
	// One model, so the chart's limit (the sum over upstreams) is its
	// upstream's.
	f := fileFrom(t, reloadJSON(`"cap": {"targets": [{"connection": "mock/a", "model": "m-dash-cap"}]}`, ""))
	g := startGW(t, f, gwOpts{env: map[string]string{"ADAPTIVE_ADMISSION_MODE": "enforce", "ADAPTIVE_ADMISSION_MIN_LIMIT": "1",
		"ADAPTIVE_ADMISSION_INITIAL_LIMIT": "8", "ADAPTIVE_ADMISSION_MAX_LIMIT": "32", "ADAPTIVE_ADMISSION_MAX_WAIT_MS": "20000",
		"ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT": "64"}, pressure: cpuUnknown})
	setBehavior(t, map[string]mockprovider.Behavior{"m-dash-cap": {LatencyMS: 60, Slots: 8, OverSlots: "queue"}})

	// Twenty callers, each its own tenant, send back to back until the end.
	stop := testutil.Callers(20, 30*time.Second, func(i int, hc *http.Client) bool {
		req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(`{"model":"cap","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", fmt.Sprintf("Bearer cap-caller-%d", i))
		resp, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck
			resp.Body.Close()
		}
		if err != nil || resp.StatusCode != 200 {
			time.Sleep(50 * time.Millisecond) // a shed caller backs off, as a client would
		}
		return true
	})
	defer stop()

	b := openBrowser(t, exe)
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(g.base+"/dashboard")); err != nil {
		t.Fatal(err)
	}
	// Until the page's script has drawn the chart once, it has no
	// data-limits (or no chart yet): an empty list, not an exception.
	const limits = `(document.getElementById("limit-chart")?.dataset.limits ?? "").split(",").filter(Boolean).map(Number)`
	b.WaitJS("the chart's limit reaches the 8 slots", `Math.max(0, ...`+limits+`) >= 8`)
	peak, err := chromedp.Run(b.Ctx, chromedp.Evaluate[float64](`Math.max(...`+limits+`)`))
	if err != nil {
		t.Fatal(err)
	}
	b.Shot("admission-limit-before")

	setBehavior(t, map[string]mockprovider.Behavior{"m-dash-cap": {LatencyMS: 60, Slots: 2, OverSlots: "queue"}})
	b.WaitJS(fmt.Sprintf("the chart's newest limit points at most half the peak %.0f", peak),
		fmt.Sprintf(`(() => { const l = %s; return l.length >= 3 && l.slice(-3).every(v => v <= %f / 2); })()`, limits, peak))
	last, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[[]float64](limits+`.slice(-5)`))
	t.Logf("limit peak %.0f before the capacity drop; newest points after it %v", peak, last)
	b.Shot("admission-limit-after")
}

// scaleFile is a config of n models, each on its own target (so n
// targets and n upstreams) of the mock provider.
func scaleFile(t testing.TB, n int) *config.File {
	t.Helper()
	var models []string
	for i := 0; i < n; i++ {
		models = append(models, fmt.Sprintf(`"sc-%03d": {"targets": [{"connection": "mock/a", "model": "m-sc-%03d"}]}`, i, i))
	}
	f := fileFrom(t, reloadJSON(strings.Join(models, ",\n"), ""))
	return f
}

// scaleEnv makes every lane wait: one place per upstream (taken by
// FillLanes), waits long enough not to time out while the page loads.
var scaleEnv = map[string]string{"ADAPTIVE_ADMISSION_MODE": "enforce", "ADAPTIVE_ADMISSION_MIN_LIMIT": "1",
	"ADAPTIVE_ADMISSION_INITIAL_LIMIT": "1", "ADAPTIVE_ADMISSION_MAX_LIMIT": "1", "ADAPTIVE_ADMISSION_MAX_WAIT_MS": "60000",
	"ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT": "64"}

// TestDashboardAtScale: with 100 targets and 1,000 tenant lanes the
// snapshot stays bounded (50 lanes and 100 targets listed, with the
// totals) and the page renders every provider row and the lane and target
// counters. Speed is BenchmarkDashboardSnapshot's, not asserted here.
func TestDashboardAtScale(t *testing.T) {
	exe := chromiumPath(t)
	g := startGW(t, scaleFile(t, 100), gwOpts{env: scaleEnv})
	release := g.gw.FillLanes(1000)
	defer release()

	var body []byte
	waitFor(t, "the snapshot to show the queued lanes", func() bool {
		var err error
		if body, err = json.Marshal(g.gw.DashboardSnapshot()); err != nil {
			t.Fatal(err)
		}
		return jsonField(t, body, "admission", "queuedLanes") == float64(1000)
	})
	lanes, queued := jsonField(t, body, "admission", "laneCount"), jsonField(t, body, "admission", "queuedLanes")
	if lanes != float64(1000) || queued != float64(1000) || jsonField(t, body, "providerCount") != float64(100) || jsonLen(t, body, "providers") != 100 {
		t.Fatalf("snapshot: laneCount %v, queuedLanes %v, providerCount %v, %d providers listed", lanes, queued, jsonField(t, body, "providerCount"), jsonLen(t, body, "providers"))
	}
	t.Logf("snapshot with 1000 lanes and 100 targets: %d bytes, %d lanes listed", len(body), jsonLen(t, body, "admission", "lanes"))
	if n := jsonLen(t, body, "admission", "lanes"); n > 50 {
		t.Fatalf("%d lanes listed; the snapshot lists at most 50", n)
	}
	if len(body) > 256<<10 {
		t.Fatalf("snapshot of %d bytes: it must stay bounded whatever the number of lanes", len(body))
	}

	b := openBrowser(t, exe)
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(g.base+"/dashboard")); err != nil {
		t.Fatal(err)
	}
	b.WaitJS("the lane counter shows 1,000 lanes, all queued", `/^\(1000 queued of 1000 lanes\)$/.test(document.getElementById("lanes-count").textContent)`)
	b.WaitJS("the target counter shows 100 targets", `document.getElementById("providers-count").textContent.startsWith("(100 targets,")`)
	b.WaitJS("every target has its row", `document.querySelectorAll("#providers-table tbody tr[data-target]").length === 100`)
	b.WaitJS("the lanes table lists its 50 and says how many more", `(() => {
		const rows = document.querySelectorAll("#lanes tbody tr");
		return rows.length >= 50 && [...rows].filter(r => r.cells.length === 4).length === 50;
	})()`)
	b.Shot("scale-1000-lanes-100-targets")
}

// jsonLen is the length of the array at path in a JSON object.
func jsonLen(t testing.TB, b []byte, path ...string) int {
	a, _ := jsonField(t, b, path...).([]any)
	return len(a)
}
