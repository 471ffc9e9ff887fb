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

// enforceEnv pins each upstream's limit so that exactly one small chat
// request (cost 1) is in flight at a time.
func enforceEnv(extra ...string) map[string]string {
	env := map[string]string{
		"ADAPTIVE_ADMISSION_MODE": "enforce", "ADAPTIVE_ADMISSION_MIN_LIMIT": "1", "ADAPTIVE_ADMISSION_INITIAL_LIMIT": "1",
		"ADAPTIVE_ADMISSION_MAX_LIMIT": "1", "ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT": "1", "ADAPTIVE_ADMISSION_MAX_WAIT_MS": "400",
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

// upstream returns the adaptiveAdmission entry of the named upstream.
func (g *gwEnv) upstream(name string) map[string]any {
	g.t.Helper()
	ups, _ := g.admission()["upstreams"].([]any)
	for _, u := range ups {
		if m, _ := u.(map[string]any); m["name"] == name {
			return m
		}
	}
	g.t.Fatalf("no upstream %q in adaptiveAdmission", name)
	return nil
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
	r = g.post("/v1/messages", `{"model":"slow","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, "Anthropic-Version", "2023-06-01")
	if r.status != 503 || jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "error", "type") != "overloaded_error" ||
		jsonField(t, r.body, "error", "code") != "admission_queue_full" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("queue full, Anthropic dialect: %d %s", r.status, r.body)
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
	if adm["rejectedCount"] != float64(3) || reasons["admission_queue_full"] != float64(2) ||
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

// TestStreamingLatencySampleIsTimeToFirstToken: a stream's latency sample
// is its time to first token, while it holds its place for the whole
// stream: the upstream's no-queue stream latency stays near the first
// token's 20 ms, not the 220 ms each stream lasts.
func TestStreamingLatencySampleIsTimeToFirstToken(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "ttft": {"targets": [{"connection": "mock/a", "model": "m-ttft"}]}`), nil)
	setBehavior(t, map[string]mockprovider.Behavior{"m-ttft": {LatencyMS: 20, ChunkCount: 4, ChunkGapMS: 50}})
	var wg sync.WaitGroup
	for i := 0; i < 48; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := g.post("/v1/chat/completions", `{"model":"ttft","stream":true,"messages":[]}`); r.status != 200 {
				t.Errorf("stream: %d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	var u map[string]any
	waitFor(t, "a judged phase", func() bool {
		u = g.upstream("mock/a/m-ttft")
		return u["baselineStreamMs"].(float64) > 0
	})
	if b, held := u["baselineStreamMs"].(float64), u["heldMs"].(float64); b > 120 || held < 150 {
		t.Fatalf("stream latency %.0f ms (want the first token's, about 20), held %.0f ms (want the whole stream, about 220): %v", b, held, u)
	}
}

// TestUpstreamRateLimitCountsAsADrop: a 429 that was failed over is a drop
// of its own upstream, not of the one that served the request; one drop
// below the limit does not cut it (a rate limit, not congestion).
func TestUpstreamRateLimitCountsAsADrop(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), map[string]string{"ADAPTIVE_ADMISSION_WINDOW_MS": "100"})
	setBehavior(t, map[string]mockprovider.Behavior{"m-first": {Fail: mockprovider.FailSpec{Mode: "status", Status: 429}}})
	r := g.post("/v1/chat/completions", `{"model":"failover","messages":[]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "1" {
		t.Fatalf("failover: %d %v", r.status, r.header)
	}
	var first map[string]any
	waitFor(t, "a phase to see the drop", func() bool {
		first = g.upstream("mock/a/m-first")
		p, _ := first["lastPhase"].(map[string]any)
		return p["drops"] == float64(1)
	})
	if first["currentLimit"] != float64(4) {
		t.Fatalf("one drop below the limit cut it: %v", first)
	}
	second := g.upstream("mock/b/m-second")
	if p, _ := second["lastPhase"].(map[string]any); p["drops"] != nil && p["drops"] != float64(0) {
		t.Fatalf("the serving upstream was charged the other's drop: %v", second)
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

// TestTargetCapSpillsThenQueues: a target at its max_concurrent is passed
// over for the next target with room (spill-over, named in
// X-OmniRoute-Skipped-Targets); when every target is at its cap the
// request waits for the first to free, within its deadline, and the
// provider never sees a target over its cap.
func TestTargetCapSpillsThenQueues(t *testing.T) {
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
	// Both at their cap: a caller that cannot wait is refused at its
	// deadline; another model routing to the same upstream shares its cap.
	for _, m := range []string{"capped", "alias"} {
		r := g.post("/v1/chat/completions", `{"model":"`+m+`","messages":[]}`, "X-Omniroute-Timeout-Ms", "150")
		if r.status != 503 || jsonField(t, r.body, "error", "code") != "admission_deadline" || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s, every target at its cap, 150 ms deadline: %d %v %s", m, r.status, r.header, r.body)
		}
	}
	// One that can wait is served when the first frees.
	third := g.postAsync("/v1/chat/completions", body)
	r2 := <-second
	if r2.status != 200 || r2.header.Get("X-OmniRoute-Target") != "mock/b/m-cap-2" ||
		r2.header.Get("X-OmniRoute-Skipped-Targets") != "mock/a/m-cap-1" || r2.header.Get("X-OmniRoute-Fallbacks") != "0" {
		t.Fatalf("second request: %d %v", r2.status, r2.header)
	}
	<-first
	r3 := <-third
	if r3.status != 200 || r3.header.Get("X-OmniRoute-Admission-Wait-Ms") == "" {
		t.Fatalf("third request, queued: %d %v %s", r3.status, r3.header, r3.body)
	}
	st := mockStats(t)
	if st.Models["m-cap-1"].MaxInflight != 1 || st.Models["m-cap-2"].MaxInflight != 1 {
		t.Fatalf("a target went over its cap: %+v", st.Models)
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

// TestFusionSkipsOnlyMembersBeyondTheQuorum: a panel member whose
// upstream has no room is skipped when the quorum has room elsewhere, so
// a fusion under congestion still answers; nothing reaches the skipped
// member.
func TestFusionSkipsOnlyMembersBeyondTheQuorum(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, fusionModels+`,
    "p3": {"targets": [{"connection": "mock/b", "model": "m-p3", "max_concurrent": 1}]}`), nil)
	b := fusionBehaviors()
	b["m-p3"] = mockprovider.Behavior{Text: "gamma", LatencyMS: 600}
	setBehavior(t, b)
	busy := g.postAsync("/v1/chat/completions", `{"model":"p3","messages":[]}`)
	waitFor(t, "m-p3 busy", func() bool { return mockStats(t).Models["m-p3"].Inflight == 1 })
	r := g.post("/v1/chat/completions", `{"model":"fuse","messages":[{"role":"user","content":"q"}]}`)
	if r.status != 200 || r.header.Get("X-OmniRoute-Fusion-Panel") != "answered=2; failed=0; skipped=1; quorum=2" {
		t.Fatalf("quorum covered: %d %v %s", r.status, r.header, r.body)
	}
	if r.header.Get("X-OmniRoute-Skipped-Targets") != "mock/b/m-p3" {
		t.Fatalf("skipped header %q", r.header.Get("X-OmniRoute-Skipped-Targets"))
	}
	<-busy
	if st := mockStats(t); st.Models["m-p3"].Requests != 1 || st.Models["m-p2"].Requests != 1 || st.Models["m-p1"].Requests != 2 {
		t.Fatalf("want panel m-p1, m-p2 and the judge m-p1, only the background request at m-p3: %+v", st.Models)
	}
}

// TestFusionWaitsForItsQuorumWithinItsDeadline: with every member at its
// max_concurrent, a fusion waits for its quorum (in upstream order, so two
// fusions never wait on each other's members); a caller that cannot wait
// that long is refused at its deadline with nothing sent to the panel.
func TestFusionWaitsForItsQuorumWithinItsDeadline(t *testing.T) {
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
	r := g.post("/v1/chat/completions", `{"model":"capfuse","messages":[{"role":"user","content":"q"}]}`, "X-Omniroute-Timeout-Ms", "150")
	if r.status != 503 || jsonField(t, r.body, "error", "code") != "admission_deadline" || r.header.Get("Retry-After") == "" {
		t.Fatalf("no room within the deadline: %d %v %s", r.status, r.header, r.body)
	}
	waiting := g.postAsync("/v1/chat/completions", `{"model":"capfuse","messages":[{"role":"user","content":"q"}]}`)
	<-first
	<-second
	if r := <-waiting; r.status != 200 || r.header.Get("X-OmniRoute-Admission-Wait-Ms") == "" {
		t.Fatalf("a fusion that may wait: %d %v %s", r.status, r.header, r.body)
	}
	if st := mockStats(t); st.Models["m-c1"].MaxInflight != 1 || st.Models["m-c2"].MaxInflight != 1 {
		t.Fatalf("a member went over its cap: %+v", st.Models)
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
	waitFor(t, "lane queued", func() bool { return g.admissionNumber("queuedCount") == 1 })
	adm := g.admission()
	u := g.upstream("mock/a/m-adm-lane")
	lanesList, _ := u["laneTenants"].([]any)
	if adm["virtualLanes"] != true || adm["laneCount"] != float64(1) || adm["queuedCost"] != float64(1) || len(lanesList) != 1 {
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
	for _, f := range []string{"currentLimit", "minLimit", "maxLimit", "globalLimit", "activeCost", "activeCount", "queuedCost", "queuedCount",
		"virtualActiveCost", "virtualActiveCount", "virtualQueuedCost", "virtualQueuedCount", "admittedCount", "rejectedCount", "busyCount",
		"wouldAdmitCount", "wouldQueueCount", "wouldRejectCount", "shutdown", "classes", "upstreams"} {
		if _, ok := adm[f]; !ok {
			t.Fatalf("adaptiveAdmission lacks %s", f)
		}
	}
	for _, f := range []string{"name", "currentLimit", "kneeEstimate", "phase", "converged", "activeCost", "queuedCount", "laneCount",
		"baselineStreamMs", "baselinePlainMs", "heldMs", "drainPerSecond", "queueTargetMs", "lastPhase", "lastWindow"} {
		if _, ok := u[f]; !ok {
			t.Fatalf("an upstream lacks %s: %v", f, u)
		}
	}
	m := string(g.get("/metrics").body)
	for _, want := range []string{`omniroute_admission_upstream_limit{upstream="mock/a/m-adm-lane"} 1`, "omniroute_admission_queued_requests 1",
		"omniroute_admission_lanes 1", `omniroute_admission_mode{mode="enforce"} 1`} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	wg.Wait()
}

// TestAdmissionHealthHasTheOperatorNames: the names OmniRoute's
// documentation gives operators (their dashboards and alerts read them)
// are at the top of adaptiveAdmission, each with the value of what really
// happened: a combo target skipped, a tenant's queued request, a refusal,
// answers' latencies and the busy share of the limit.
func TestAdmissionHealthHasTheOperatorNames(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "hsolo": {"targets": [{"connection": "mock/a", "model": "m-h1"}]},
    "hcombo": {"targets": [{"connection": "mock/a", "model": "m-h1"}, {"connection": "mock/a", "model": "m-h2"}]}`),
		enforceEnv("OMNIROUTE_CHAT_VIRTUAL_LANES", "1", "ADAPTIVE_ADMISSION_MAX_QUEUE_COUNT", "4", "ADAPTIVE_ADMISSION_WINDOW_MS", "200",
			"ADAPTIVE_ADMISSION_MAX_WAIT_MS", "5000"))
	setBehavior(t, map[string]mockprovider.Behavior{"m-h1": {LatencyMS: 700}, "m-h2": {LatencyMS: 700}})
	body := func(m string) string { return `{"model":"` + m + `","messages":[{"role":"user","content":"hi"}]}` }
	first := g.postAsync("/v1/chat/completions", body("hsolo"), "Authorization", "Bearer tenant-h-one")
	waitFor(t, "m-h1 busy", func() bool { return mockStats(t).Models["m-h1"].Inflight == 1 })
	// The combo's first target has no room: it is skipped for the second.
	combo := g.postAsync("/v1/chat/completions", body("hcombo"), "Authorization", "Bearer tenant-h-two")
	waitFor(t, "m-h2 busy", func() bool { return mockStats(t).Models["m-h2"].Inflight == 1 })
	// A third tenant waits in its lane on m-h1.
	queued := g.postAsync("/v1/chat/completions", body("hsolo"), "Authorization", "Bearer tenant-h-three")
	waitFor(t, "a lane queued", func() bool { return g.admissionNumber("laneQueuedCount") == 1 })
	// A caller that cannot wait for m-h1 is refused.
	if r := g.post("/v1/chat/completions", body("hsolo"), "Authorization", "Bearer tenant-h-four", "X-Omniroute-Timeout-Ms", "100"); r.status != 503 {
		t.Fatalf("a caller that cannot wait: %d %s", r.status, r.body)
	}
	waitFor(t, "a busy window", func() bool { return g.admissionNumber("utilization") > 0 })
	// The refused caller's lane publishes its emptied queue a moment after
	// the refusal is answered: wait until one lane alone shows a queue.
	var adm map[string]any
	waitFor(t, "one queued lane", func() bool {
		adm = g.admission()
		tenants, _ := adm["laneTenants"].([]any)
		n := 0
		for _, x := range tenants {
			if lt, _ := x.(map[string]any); lt["queuedCount"] != nil && lt["queuedCount"] != float64(0) {
				n++
			}
		}
		return n == 1
	})
	if adm["laneQueuedCount"] != float64(1) || adm["laneQueuedCost"] != float64(1) || adm["laneCount"].(float64) < 1 {
		t.Fatalf("lane figures: %v", adm)
	}
	// Every lane is listed (the refused caller's too), the one with a
	// queue first.
	tenants, _ := adm["laneTenants"].([]any)
	if len(tenants) != int(adm["laneCount"].(float64)) {
		t.Fatalf("laneTenants %v, laneCount %v", adm["laneTenants"], adm["laneCount"])
	}
	for i, x := range tenants {
		lt := x.(map[string]any)
		if key, _ := lt["tenantKey"].(string); !strings.HasPrefix(key, "key_") || len(key) != 20 || (i == 0) != (lt["queuedCount"] == float64(1)) {
			t.Fatalf("laneTenants must carry opaque tenant ids, the queued lane first: %v", tenants)
		}
	}
	if u := adm["utilization"].(float64); u <= 0 || u > 1 {
		t.Fatalf("utilization %v", u)
	}
	for _, r := range []<-chan response{first, combo, queued} {
		if resp := <-r; resp.status != 200 {
			t.Fatalf("a served request: %d %s", resp.status, resp.body)
		}
	}
	adm = g.admission()
	if adm["virtualFanoutSkipped"] != float64(1) || adm["admittedCount"] != float64(3) || adm["rejectedCount"] != float64(1) {
		t.Fatalf("counters: skipped %v admitted %v rejected %v", adm["virtualFanoutSkipped"], adm["admittedCount"], adm["rejectedCount"])
	}
	short, long := adm["shortLatencyEwma"].(float64), adm["longLatencyEwma"].(float64)
	if short < 500 || long < 500 || short > 5000 || long > 5000 {
		t.Fatalf("latency averages %v / %v ms, want about the mock's 700 ms", short, long)
	}
	if u := g.upstream("mock/a/m-h1"); u["longLatencyEwma"].(float64) < 500 {
		t.Fatalf("the upstream's own average: %v", u)
	}
}

// TestMemoryPressureCutsTheAdaptiveLimit: a critical memory-pressure
// sample (here an OOM kill in the cgroup) halves every upstream's limit
// at once.
func TestMemoryPressureCutsTheAdaptiveLimit(t *testing.T) {
	g := startGateway(t, testFile(t, ""), map[string]string{"ADAPTIVE_ADMISSION_MIN_LIMIT": "1", "ADAPTIVE_ADMISSION_INITIAL_LIMIT": "8", "ADAPTIVE_ADMISSION_MAX_LIMIT": "8"})
	if l := g.upstream("mock/a/m-first")["currentLimit"]; l != float64(4) {
		t.Fatalf("limit while calibrating %v, want 4", l)
	}
	base := transport.PressureSample{GoUsed: 1 << 20, GoLimit: -1, CgroupCurrent: -1, CgroupFile: -1, CgroupMax: -1, CgroupHigh: -1, PSISome: -1, PSIFull: -1}
	g.gw.Pressure().Observe(base) // baselines the OOM counters
	oom := base
	oom.OOMKill = 1
	g.gw.Pressure().Observe(oom)
	waitFor(t, "the limit to be cut by ×0.5", func() bool { return g.upstream("mock/a/m-first")["currentLimit"] == float64(2) })
}
