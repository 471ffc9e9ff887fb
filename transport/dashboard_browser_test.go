package transport_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/svctest"
)

// screenshotDir is where the browser test saves what it saw (README:
// "Dashboard"); git ignores it, CI keeps it as an artifact.
const screenshotDir = "../artifacts/screenshots"

// chromiumPath finds the browser: CHROMIUM_PATH, else chromium on PATH
// (Debian's chromium package, which .ci/run installs).
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium found: apt-get install -y chromium (.ci/run does it), or set CHROMIUM_PATH")
	return ""
}

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
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 2400),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(alloc)
	defer cancelCtx()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	// waitJS polls a page expression until it is true.
	waitJS := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("error").textContent + " | " + document.body.innerText.slice(0, 3000)`))
			t.Fatalf("%s: %v\npage: %s", what, err, page)
		}
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

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

	// A request error shows in the requests panel with its code.
	r := g.post("/v1/chat/completions", `{"model":"no-such-model","messages":[]}`, "X-Request-Id", "dash-error-request")
	if r.status != 404 {
		t.Fatalf("unknown model: %d %s", r.status, r.body)
	}
	waitJS("the error request in the requests panel", `(() => {
		const r = document.querySelector('#requests-table tr[data-request-id="dash-error-request"]');
		return !!r && r.querySelector(".status").textContent === "404" && r.querySelector(".code").textContent === "model_not_found";
	})()`)
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
	cancelTimeout()
	cancelCtx()
	cancelAlloc()
	if !strings.HasPrefix(g.base, "http://127.0.0.1:") {
		t.Fatalf("the gateway must listen on loopback: %s", g.base)
	}
}
