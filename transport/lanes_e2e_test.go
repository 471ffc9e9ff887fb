package transport_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/transport"
)

// enforceEnv pins the limit so that exactly one small non-streaming chat
// request (cost 7) is in flight at a time.
func enforceEnv(extra ...string) map[string]string {
	env := map[string]string{
		"ADAPTIVE_ADMISSION_MODE": "enforce", "ADAPTIVE_ADMISSION_MIN_LIMIT": "7", "ADAPTIVE_ADMISSION_INITIAL_LIMIT": "7",
		"ADAPTIVE_ADMISSION_MAX_LIMIT": "7", "ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT": "1", "ADAPTIVE_ADMISSION_MAX_WAIT_MS": "400",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

func (g *gwEnv) admission() map[string]any {
	g.t.Helper()
	r := g.get("/api/monitoring/health")
	v, _ := jsonField(g.t, r.body, "adaptiveAdmission").(map[string]any)
	if v == nil {
		g.t.Fatalf("health has no adaptiveAdmission section: %s", r.body)
	}
	return v
}

func (g *gwEnv) admissionNumber(name string) float64 {
	v, _ := g.admission()[name].(float64)
	return v
}

func (g *gwEnv) postAsync(path, body string, headers ...string) <-chan response {
	ch := make(chan response, 1)
	go func() { ch <- g.post(path, body, headers...) }()
	return ch
}

func TestAdmissionRejectionsInTheCallersFormat(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "slow": {"targets": [{"connection": "mock/a", "model": "m-adm-slow"}]}`), enforceEnv())
	setBehavior(t, map[string]mockprovider.Behavior{"m-adm-slow": {LatencyMS: 900}, "m-claude": {LatencyMS: 900}})
	small := `{"model":"slow","messages":[{"role":"user","content":"hi"}]}`
	a := g.postAsync("/v1/chat/completions", small)
	waitFor(t, "one request in flight", func() bool { return g.admissionNumber("activeCount") == 1 })
	b := g.postAsync("/v1/chat/completions", small)
	waitFor(t, "one request queued", func() bool { return g.admissionNumber("queuedCount") == 1 })

	r := g.post("/v1/chat/completions", small)
	if r.status != 503 || r.header.Get("Retry-After") != "1" || jsonField(t, r.body, "error", "code") != "admission_queue_full" ||
		jsonField(t, r.body, "error", "type") != "server_error" {
		t.Fatalf("queue full: %d %v %s", r.status, r.header, r.body)
	}
	r = g.post("/v1/messages", `{"model":"claude","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, "Anthropic-Version", "2023-06-01")
	if r.status != 503 || jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "error", "type") != "overloaded_error" ||
		jsonField(t, r.body, "error", "code") != "admission_queue_full" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("queue full, Anthropic dialect: %d %s", r.status, r.body)
	}
	big := `{"model":"slow","messages":[{"role":"user","content":"` + strings.Repeat("x", 40000) + `"}]}`
	r = g.post("/v1/chat/completions", big)
	if r.status != 503 || jsonField(t, r.body, "error", "code") != "admission_oversized" || r.header.Get("Retry-After") != "" {
		t.Fatalf("oversized: %d %v %s", r.status, r.header, r.body)
	}
	rb := <-b
	if rb.status != 503 || jsonField(t, rb.body, "error", "code") != "admission_deadline" || rb.header.Get("Retry-After") != "1" {
		t.Fatalf("deadline: %d %v %s", rb.status, rb.header, rb.body)
	}
	if ra := <-a; ra.status != 200 {
		t.Fatalf("admitted request: %d %s", ra.status, ra.body)
	}
	adm := g.admission()
	reasons, _ := adm["rejectedByReason"].(map[string]any)
	if adm["rejectedCount"] != float64(4) || reasons["admission_queue_full"] != float64(2) || reasons["admission_oversized"] != float64(1) ||
		reasons["admission_deadline"] != float64(1) || adm["mode"] != "enforce" {
		t.Fatalf("snapshot %v", adm)
	}
	if n := mockStats(t).Models["m-adm-slow"].Requests; n != 1 {
		t.Fatalf("the provider saw %d requests; rejected ones must never reach it", n)
	}
}

func TestQueuedClientThatLeavesIsNotAShed(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "slow": {"targets": [{"connection": "mock/a", "model": "m-adm-hold"}]}`), enforceEnv("ADAPTIVE_ADMISSION_MAX_WAIT_MS", "5000"))
	setBehavior(t, map[string]mockprovider.Behavior{"m-adm-hold": {LatencyMS: 700}})
	body := `{"model":"slow","messages":[{"role":"user","content":"hi"}]}`
	a := g.postAsync("/v1/chat/completions", body)
	waitFor(t, "in flight", func() bool { return g.admissionNumber("activeCount") == 1 })
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "queued", func() bool { return g.admissionNumber("queuedCount") == 1 })
	left := time.Now()
	conn.Close()
	waitFor(t, "aborted", func() bool { return g.admissionNumber("abortedCount") == 1 })
	t.Logf("queued request ended %v after the client left (measured through health polling)", time.Since(left).Round(time.Millisecond))
	// Queue figures are republished every 100 ms.
	waitFor(t, "withdrawn", func() bool { return g.admissionNumber("queuedCount") == 0 })
	if g.admissionNumber("rejectedCount") != 0 {
		t.Fatal("a client that left was counted as a shed")
	}
	<-a
	if n := mockStats(t).Models["m-adm-hold"].Requests; n != 1 {
		t.Fatalf("the provider saw %d requests; the departed client's must never reach it", n)
	}
}

func TestPriorityClasses(t *testing.T) {
	resetMock(t)
	f := testFile(t, "")
	f.Tenants = append(f.Tenants, tenantWithSHA("nightly", "batch-key"))
	f.Tenants[len(f.Tenants)-1].Class = "batch"
	f.Auth.Mode = "loopback"
	g := startGateway(t, f, nil)
	body := `{"model":"echo","messages":[]}`
	r := g.post("/v1/chat/completions", body, "X-OmniRoute-Priority", "urgent")
	if r.status != 400 || jsonField(t, r.body, "error", "code") != "invalid_priority" {
		t.Fatalf("unknown priority: %d %s", r.status, r.body)
	}
	r = g.post("/v1/messages", `{"model":"claude","max_tokens":5,"messages":[]}`, "X-OmniRoute-Priority", "", "x-omniroute-priority", "HIGH")
	if r.status != 400 || jsonField(t, r.body, "error", "code") != "invalid_priority" || jsonField(t, r.body, "type") != "error" {
		t.Fatalf("unknown priority, Anthropic dialect: %d %s", r.status, r.body)
	}
	for _, tc := range []struct{ key, header, want string }{
		{"", "", "interactive"},
		{"", " Batch ", "batch"},
		{"batch-key", "", "batch"},
		{"batch-key", "interactive", "batch"}, // a batch tenant cannot raise itself
		{"someone", "batch", "batch"},
	} {
		var hs []string
		if tc.key != "" {
			hs = append(hs, "Authorization", "Bearer "+tc.key)
		}
		if tc.header != "" {
			hs = append(hs, "X-OmniRoute-Priority", tc.header)
		}
		r := g.post("/v1/chat/completions", body, hs...)
		if r.status != 200 || r.header.Get("X-OmniRoute-Priority") != tc.want {
			t.Fatalf("%+v: %d, class %q", tc, r.status, r.header.Get("X-OmniRoute-Priority"))
		}
	}
	classes, _ := g.admission()["classes"].(map[string]any)
	batch, _ := classes["batch"].(map[string]any)
	inter, _ := classes["interactive"].(map[string]any)
	if batch["admittedCount"] != float64(4) || inter["admittedCount"] != float64(1) || batch["sharePercent"] != float64(25) {
		t.Fatalf("classes %v", classes)
	}
}

func TestStreamingLatencySampleIsTimeToFirstToken(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "ttft": {"targets": [{"connection": "mock/a", "model": "m-ttft"}]}`), nil)
	setBehavior(t, map[string]mockprovider.Behavior{"m-ttft": {LatencyMS: 20, ChunkCount: 4, ChunkGapMS: 150}})
	start := time.Now()
	r := g.post("/v1/chat/completions", `{"model":"ttft","stream":true,"messages":[]}`)
	took := time.Since(start)
	if r.status != 200 || took < 500*time.Millisecond {
		t.Fatalf("stream: %d in %v", r.status, took)
	}
	waitFor(t, "the release to be observed", func() bool { return g.admissionNumber("shortLatencyEwma") > 0 })
	if ewma := g.admissionNumber("shortLatencyEwma"); ewma > 300 {
		t.Fatalf("latency sample %.0f ms for a stream with a 20 ms first token lasting %v: the whole stream was sampled", ewma, took)
	}
}

// TestFusionLatencySampleIsTheJudgeExchange: a fusion answers after its
// panel and then its judge; sampling from admission would read every switch
// to fusion traffic as a latency spike and cut the limit. The sample is the
// judge's exchange, one upstream round trip like any other request's.
func TestFusionLatencySampleIsTheJudgeExchange(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, fusionModels), nil)
	b := fusionBehaviors()
	b["m-p2"] = mockprovider.Behavior{Text: "beta", LatencyMS: 400}
	b["m-judge"] = mockprovider.Behavior{Text: "verdict"}
	setBehavior(t, b)
	start := time.Now()
	r := g.post("/v1/chat/completions", `{"model":"fuse-judged","messages":[{"role":"user","content":"q"}]}`)
	took := time.Since(start)
	if r.status != 200 || r.header.Get("X-OmniRoute-Target") != "mock/a/m-judge" || took < 400*time.Millisecond {
		t.Fatalf("fusion: %d in %v, %v %s", r.status, took, r.header, r.body)
	}
	waitFor(t, "the release to be observed", func() bool { return g.admissionNumber("shortLatencyEwma") > 0 })
	if ewma := g.admissionNumber("shortLatencyEwma"); ewma > 200 {
		t.Fatalf("latency sample %.0f ms for a fusion whose judge answers at once (panel 400 ms, whole request %v): the panel was sampled", ewma, took)
	}
}

func TestUpstreamRateLimitCountsAsADrop(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), map[string]string{"ADAPTIVE_ADMISSION_MODE": "enforce", "ADAPTIVE_ADMISSION_WINDOW_MS": "100"})
	setBehavior(t, map[string]mockprovider.Behavior{"m-first": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429}}})
	r := g.post("/v1/chat/completions", `{"model":"failover","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "1" {
		t.Fatalf("failover: %d %v", r.status, r.header)
	}
	waitFor(t, "a window to see the drop", func() bool {
		w, _ := g.admission()["lastWindow"].(map[string]any)
		return w["drops"] == float64(1)
	})
	w, _ := g.admission()["lastWindow"].(map[string]any)
	if w["rule"] != "decrease" || w["limitAfter"] != float64(51) {
		t.Fatalf("a 429 that was failed over must cut the limit by ×0.8: %v", w)
	}
}

func TestRoundRobinRotationHonoursWeights(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "spread": {"strategy": "round-robin", "targets": [{"connection": "mock/a", "model": "m-rr-a", "weight": 2}, {"connection": "mock/b", "model": "m-rr-b"}]},
    "even": {"strategy": "round-robin", "targets": [{"connection": "mock/a", "model": "m-rr-c"}, {"connection": "mock/b", "model": "m-rr-d"}]}`), nil)
	var got, even []string
	for i := 0; i < 6; i++ {
		r := g.post("/v1/chat/completions", `{"model":"spread","messages":[]}`)
		got = append(got, r.header.Get("X-OmniRoute-Target"))
		r = g.post("/v1/chat/completions", `{"model":"even","messages":[]}`)
		even = append(even, r.header.Get("X-OmniRoute-Target"))
	}
	a, b := "mock/a/m-rr-a", "mock/b/m-rr-b"
	want := []string{a, b, a, a, b, a} // smooth weighted round robin, 2:1
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("weighted rotation %v, want %v", got, want)
	}
	if strings.Join(even, " ") != strings.Repeat("mock/a/m-rr-c mock/b/m-rr-d ", 3)[:len(strings.Join(even, " "))] {
		t.Fatalf("even rotation %v", even)
	}
	// A failing start target fails over to the next in rotation.
	setBehavior(t, map[string]mockprovider.Behavior{"m-rr-b": {Fail: mockprovider.FailSpec{Mode: "status", Status: 503}}})
	for i := 0; i < 3; i++ {
		r := g.post("/v1/chat/completions", `{"model":"spread","messages":[]}`)
		if r.status != 200 || r.header.Get("X-OmniRoute-Target") != a {
			t.Fatalf("failover within the rotation: %d %v", r.status, r.header)
		}
	}
}

func TestTargetCapSkipsBusyTargetsWithoutWaiting(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "capped": {"targets": [{"connection": "mock/a", "model": "m-cap-1", "max_concurrent": 1}, {"connection": "mock/b", "model": "m-cap-2", "max_concurrent": 1}]},
    "alias": {"targets": [{"connection": "mock/a", "model": "m-cap-1"}]}`), nil)
	setBehavior(t, map[string]mockprovider.Behavior{"m-cap-1": {LatencyMS: 600}, "m-cap-2": {LatencyMS: 600}})
	body := `{"model":"capped","messages":[]}`
	first := g.postAsync("/v1/chat/completions", body)
	waitFor(t, "first target busy", func() bool { return mockStats(t).Models["m-cap-1"].Inflight == 1 })
	second := g.postAsync("/v1/chat/completions", body)
	waitFor(t, "second target busy", func() bool { return mockStats(t).Models["m-cap-2"].Inflight == 1 })
	start := time.Now()
	r := g.post("/v1/chat/completions", body)
	if r.status != 503 || jsonField(t, r.body, "error", "code") != "targets_busy" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("all targets at their cap: %d %s", r.status, r.body)
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Fatalf("a busy target was waited for (%v)", d)
	}
	if r.header.Get("X-OmniRoute-Skipped-Targets") != "mock/a/m-cap-1, mock/b/m-cap-2" {
		t.Fatalf("skipped header %q", r.header.Get("X-OmniRoute-Skipped-Targets"))
	}
	// Another model routing to the same upstream shares its cap.
	if r := g.post("/v1/chat/completions", `{"model":"alias","messages":[]}`); r.status != 503 || jsonField(t, r.body, "error", "code") != "targets_busy" {
		t.Fatalf("shared cap: %d %s", r.status, r.body)
	}
	r2 := <-second
	if r2.status != 200 || r2.header.Get("X-OmniRoute-Target") != "mock/b/m-cap-2" ||
		r2.header.Get("X-OmniRoute-Skipped-Targets") != "mock/a/m-cap-1" || r2.header.Get("X-OmniRoute-Fallbacks") != "0" {
		t.Fatalf("second request: %d %v", r2.status, r2.header)
	}
	<-first
	st := mockStats(t)
	if st.Models["m-cap-1"].MaxInflight != 1 || st.Models["m-cap-2"].MaxInflight != 1 {
		t.Fatalf("a target went over its cap: %+v", st.Models)
	}
	if g.admissionNumber("targetBusySkipped") != 4 {
		t.Fatalf("targetBusySkipped %v", g.admissionNumber("targetBusySkipped"))
	}
}

const fusionModels = `,
    "fuse": {"strategy": "fusion", "targets": [{"connection": "mock/a", "model": "m-p1"}, {"connection": "mock/a", "model": "m-p2"}, {"connection": "mock/b", "model": "m-p3"}],
      "fusion": {"quorum": 2, "judge_prompt": "Answers:\n{{answers}}"}},
    "fuse-judged": {"strategy": "fusion", "targets": [{"connection": "mock/a", "model": "m-p1"}, {"connection": "mock/a", "model": "m-p2"}, {"connection": "mock/b", "model": "m-p3"}],
      "fusion": {"quorum": 2, "judge": "judge", "judge_prompt": "Answers:\n{{answers}}"}},
    "judge": {"targets": [{"connection": "mock/a", "model": "m-judge"}]}`

func fusionBehaviors() map[string]mockprovider.Behavior {
	return map[string]mockprovider.Behavior{
		"m-p1": {Text: "alpha", LatencyMS: 30}, "m-p2": {Text: "beta", LatencyMS: 60},
		"m-p3": {Fail: mockprovider.FailSpec{Mode: "status", Status: 500}}, "m-judge": {Text: "verdict", ChunkCount: 3},
	}
}

// bodiesFor returns the SHA-256s of the bodies the mock received for model.
func bodiesFor(st mockprovider.Stats, model string) []string {
	var out []string
	for _, b := range st.Bodies {
		if b.Model == model {
			out = append(out, b.SHA256)
		}
	}
	return out
}

func TestFusionQuorumAndJudge(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, fusionModels), nil)
	setBehavior(t, fusionBehaviors())
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`
	body := `{"model":"fuse","messages":[{"role":"user","content":"q"}],"stream":false,` + tools + `}`
	r := g.post("/v1/chat/completions", body)
	if r.status != 200 {
		t.Fatalf("fusion: %d %s", r.status, r.body)
	}
	choices, _ := jsonField(t, r.body, "choices").([]any)
	msg := choices[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "alpha" {
		t.Fatalf("the default judge is the first member that answered (m-p1 says alpha): %s", r.body)
	}
	if r.header.Get("X-OmniRoute-Target") != "mock/a/m-p1" || r.header.Get("X-OmniRoute-Fusion-Panel") != "answered=2; failed=1; skipped=0; quorum=2" ||
		r.header.Get("X-OmniRoute-Fusion-Answered") != "mock/a/m-p1, mock/a/m-p2" || r.header.Get("X-OmniRoute-Fusion-Failed") != "mock/b/m-p3" {
		t.Fatalf("fusion headers %v", r.header)
	}
	st := mockStats(t)
	panel := func(model string) string {
		return sha([]byte(`{"model":"` + model + `","messages":[{"role":"user","content":"q"}]}`))
	}
	judge := sha([]byte(`{"model":"m-p1","messages":[{"role":"user","content":"q"},{"role":"user","content":"Answers:\nAnswer 1:\nalpha\n\nAnswer 2:\nbeta"}],"stream":false,` + tools + `}`))
	if got := bodiesFor(st, "m-p1"); len(got) != 2 || got[0] != panel("m-p1") || got[1] != judge {
		t.Fatalf("m-p1 bodies %v; want the panel request (no stream, no tools) %s then the judge request %s", got, panel("m-p1"), judge)
	}
	if got := bodiesFor(st, "m-p2"); len(got) != 1 || got[0] != panel("m-p2") {
		t.Fatalf("m-p2 bodies %v", got)
	}
	for _, b := range st.Bodies {
		if b.Model == "m-p2" && b.Headers["accept"] != "application/json" {
			t.Fatalf("panel request accept %q", b.Headers["accept"])
		}
	}

	// An explicit judge, streamed because the caller streams.
	r = g.post("/v1/chat/completions", `{"model":"fuse-judged","stream":true,"messages":[{"role":"user","content":"q"}]}`)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") || r.header.Get("X-OmniRoute-Target") != "mock/a/m-judge" {
		t.Fatalf("streamed judge: %d %v %s", r.status, r.header, r.body)
	}
	var text strings.Builder
	for _, ev := range sseEvents(r.body) {
		if ev[1] == "[DONE]" {
			continue
		}
		choices, _ := jsonField(t, []byte(ev[1]), "choices").([]any)
		if len(choices) > 0 {
			if d, ok := choices[0].(map[string]any)["delta"].(map[string]any); ok {
				s, _ := d["content"].(string)
				text.WriteString(s)
			}
		}
	}
	if text.String() != "verdict" {
		t.Fatalf("streamed judge text %q", text.String())
	}
	st = mockStats(t)
	if got := bodiesFor(st, "m-p2"); len(got) != 2 || got[1] != panel("m-p2") {
		t.Fatalf("a streaming caller's panel requests must not stream: %v", got)
	}

	// Too few survivors.
	setBehavior(t, map[string]mockprovider.Behavior{"m-p2": {Fail: mockprovider.FailSpec{Mode: "status", Status: 529}}})
	r = g.post("/v1/messages", `{"model":"fuse","max_tokens":8,"messages":[{"role":"user","content":"q"}]}`, "Anthropic-Version", "2023-06-01")
	if r.status != 503 || jsonField(t, r.body, "error", "code") != "fusion_quorum_not_met" || jsonField(t, r.body, "type") != "error" {
		t.Fatalf("quorum not met: %d %s", r.status, r.body)
	}
	if r.header.Get("X-OmniRoute-Fusion-Panel") != "answered=1; failed=2; skipped=0; quorum=2" {
		t.Fatalf("panel header %q", r.header.Get("X-OmniRoute-Fusion-Panel"))
	}
}

// TestFusionLanesSkipOnlyMembersBeyondTheQuorum: the parent's admission
// covers the first quorum members; under congestion the lanes probe sheds
// the rest, so an admitted fusion still answers.
func TestFusionLanesSkipOnlyMembersBeyondTheQuorum(t *testing.T) {
	resetMock(t)
	// Limit 10: the parent (cost 9 with a panel of three) fits, but no
	// member (cost 7 each, not streaming) fits beside it.
	g := startGateway(t, testFile(t, fusionModels), map[string]string{
		"ADAPTIVE_ADMISSION_MODE": "enforce", "OMNIROUTE_CHAT_VIRTUAL_LANES": "true",
		"ADAPTIVE_ADMISSION_MIN_LIMIT": "10", "ADAPTIVE_ADMISSION_INITIAL_LIMIT": "10", "ADAPTIVE_ADMISSION_MAX_LIMIT": "10",
	})
	setBehavior(t, fusionBehaviors())
	r := g.post("/v1/chat/completions", `{"model":"fuse","messages":[{"role":"user","content":"q"}]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Fusion-Panel") != "answered=2; failed=0; skipped=1; quorum=2" {
		t.Fatalf("quorum covered: %d %v %s", r.status, r.header, r.body)
	}
	if r.header.Get("X-OmniRoute-Skipped-Targets") != "mock/b/m-p3" {
		t.Fatalf("skipped header %q", r.header.Get("X-OmniRoute-Skipped-Targets"))
	}
	if g.admissionNumber("fanoutProbeSkipped") != 1 {
		t.Fatalf("fanoutProbeSkipped %v", g.admissionNumber("fanoutProbeSkipped"))
	}
	if st := mockStats(t); st.Models["m-p3"].Requests != 0 || st.Models["m-p2"].Requests != 1 || st.Models["m-p1"].Requests != 2 {
		t.Fatalf("want panel m-p1, m-p2 and the judge m-p1, nothing to the skipped m-p3: %+v", st.Models)
	}
	r = g.get("/metrics")
	if !strings.Contains(string(r.body), "omniroute_admission_fanout_probe_skipped_total 1") {
		t.Fatal("metrics lack the fan-out probe counter")
	}
}

// TestFusionAllMembersSkipped: every panel member at its max_concurrent
// cap gives 503 fusion_panel_skipped at once, naming them, and nothing
// reaches the provider.
func TestFusionAllMembersSkipped(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "capfuse": {"strategy": "fusion", "targets": [{"connection": "mock/a", "model": "m-c1", "max_concurrent": 1}, {"connection": "mock/a", "model": "m-c2", "max_concurrent": 1}],
      "fusion": {"quorum": 1}},
    "c1": {"targets": [{"connection": "mock/a", "model": "m-c1"}]},
    "c2": {"targets": [{"connection": "mock/a", "model": "m-c2"}]}`), nil)
	setBehavior(t, map[string]mockprovider.Behavior{"m-c1": {LatencyMS: 600}, "m-c2": {LatencyMS: 600}})
	first := g.postAsync("/v1/chat/completions", `{"model":"c1","messages":[]}`)
	second := g.postAsync("/v1/chat/completions", `{"model":"c2","messages":[]}`)
	waitFor(t, "both members busy", func() bool {
		st := mockStats(t)
		return st.Models["m-c1"].Inflight == 1 && st.Models["m-c2"].Inflight == 1
	})
	r := g.post("/v1/chat/completions", `{"model":"capfuse","messages":[{"role":"user","content":"q"}]}`)
	if r.status != 503 || jsonField(t, r.body, "error", "code") != "fusion_panel_skipped" || r.header.Get("Retry-After") != "1" ||
		!strings.Contains(jsonField(t, r.body, "error", "message").(string), "max_concurrent") {
		t.Fatalf("all skipped: %d %v %s", r.status, r.header, r.body)
	}
	if r.header.Get("X-OmniRoute-Skipped-Targets") != "mock/a/m-c1, mock/a/m-c2" {
		t.Fatalf("skipped header %q", r.header.Get("X-OmniRoute-Skipped-Targets"))
	}
	<-first
	<-second
	if st := mockStats(t); st.Models["m-c1"].Requests != 1 || st.Models["m-c2"].Requests != 1 {
		t.Fatalf("skipped members reached the provider: %+v", st.Models)
	}
}

func TestAdmissionHealthAndMetricsShowLanes(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "slow": {"targets": [{"connection": "mock/a", "model": "m-adm-lane"}]}`), enforceEnv("OMNIROUTE_CHAT_VIRTUAL_LANES", "1", "ADAPTIVE_ADMISSION_MAX_WAIT_MS", "3000"))
	setBehavior(t, map[string]mockprovider.Behavior{"m-adm-lane": {LatencyMS: 400}})
	body := `{"model":"slow","messages":[{"role":"user","content":"hi"}]}`
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		g.post("/v1/chat/completions", body, "Authorization", "Bearer tenant-one-secret")
	}()
	waitFor(t, "in flight", func() bool { return g.admissionNumber("activeCount") == 1 })
	go func() {
		defer wg.Done()
		g.post("/v1/chat/completions", body, "Authorization", "Bearer tenant-two-secret")
	}()
	waitFor(t, "lane queued", func() bool { return g.admissionNumber("laneQueuedCount") == 1 })
	adm := g.admission()
	lanesList, _ := adm["laneTenants"].([]any)
	if adm["virtualLanes"] != true || adm["laneCount"] != float64(1) || adm["laneQueuedCost"] != float64(7) || len(lanesList) != 1 {
		t.Fatalf("lane fields %v", adm)
	}
	key, _ := lanesList[0].(map[string]any)["tenantKey"].(string)
	if !strings.HasPrefix(key, "key_") || len(key) != 20 {
		t.Fatalf("laneTenants must carry opaque tenant ids: %q", key)
	}
	raw := g.get("/api/monitoring/health").body
	if strings.Contains(string(raw), "tenant-two-secret") {
		t.Fatal("a raw key appears in health")
	}
	for _, f := range []string{"currentLimit", "minLimit", "maxLimit", "activeCost", "activeCount", "queuedCost", "queuedCount", "virtualActiveCost",
		"virtualActiveCount", "virtualQueuedCost", "virtualQueuedCount", "admittedCount", "rejectedCount", "wouldAdmitCount", "wouldQueueCount",
		"wouldRejectCount", "shortLatencyEwma", "longLatencyEwma", "utilization", "pressure", "shutdown", "classes", "fanoutProbeSkipped"} {
		if _, ok := adm[f]; !ok {
			t.Fatalf("adaptiveAdmission lacks %s", f)
		}
	}
	m := string(g.get("/metrics").body)
	for _, want := range []string{"omniroute_admission_limit 7", `omniroute_admission_queued_requests{queue="lanes"} 1`, "omniroute_admission_lanes 1",
		`omniroute_admission_class_floor_cost{class="interactive"} 5`, `omniroute_admission_mode{mode="enforce"} 1`} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	wg.Wait()
}

// TestMemoryPressureCutsTheAdaptiveLimit: a critical memory-pressure
// sample (here an OOM kill in the cgroup) halves the adaptive limit at once.
func TestMemoryPressureCutsTheAdaptiveLimit(t *testing.T) {
	g := startGateway(t, testFile(t, ""), map[string]string{"ADAPTIVE_ADMISSION_MODE": "enforce"})
	if l := g.admissionNumber("currentLimit"); l != 64 {
		t.Fatalf("initial limit %v", l)
	}
	base := transport.PressureSample{GoUsed: 1 << 20, GoLimit: -1, CgroupCurrent: -1, CgroupFile: -1, CgroupMax: -1, CgroupHigh: -1, PSISome: -1, PSIFull: -1}
	g.gw.Pressure().Observe(base) // baselines the OOM counters
	oom := base
	oom.OOMKill = 1
	g.gw.Pressure().Observe(oom)
	waitFor(t, "the limit to be cut by ×0.5", func() bool { return g.admissionNumber("currentLimit") == 32 })
}
