package transport_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/transport/gateway"
)

// pressureFeed is a sampler the tests steer.
type pressureFeed struct {
	cur atomic.Pointer[pressure.Sample]
}

func newPressureFeed() *pressureFeed {
	f := &pressureFeed{}
	f.set(0.1)
	return f
}

func (f *pressureFeed) set(goRatio float64) {
	s := pressure.Sample{GoUsed: int64(goRatio * 1000), GoLimit: 1000, CgroupCurrent: -1, CgroupFile: -1, CgroupMax: -1, CgroupHigh: -1, OOM: -1, OOMKill: -1, PSISome: -1, PSIFull: -1}
	f.cur.Store(&s)
}

func (f *pressureFeed) sample() pressure.Sample { return *f.cur.Load() }

// startAdmissionGateway is startGateway with a steerable pressure sampler.
func startAdmissionGateway(t *testing.T, f *config.File, envVars map[string]string, feed *pressureFeed) *gwEnv {
	t.Helper()
	vars := map[string]string{"OMNIROUTE_PRESSURE_SUSTAIN_CRITICAL": "1", "OMNIROUTE_PRESSURE_SUSTAIN_HIGH": "1"}
	for k, v := range envVars {
		vars[k] = v
	}
	return startGatewayWith(t, f, vars, gateway.Options{PressureSample: feed.sample})
}

// setPressure feeds a sample and waits for the severity it should cause.
func setPressure(t *testing.T, g *gwEnv, feed *pressureFeed, goRatio float64, want pressure.Severity) {
	t.Helper()
	feed.set(goRatio)
	g.gw.Pressure().Tick()
	waitFor(t, "pressure "+want.String(), func() bool { return g.gw.Pressure().State().Severity == want })
}

// chatBody is a valid chat request of n bytes: a tag particular to seed,
// then shared pseudo-random filler (generated once: instrumented byte loops
// are slow under -race).
func admissionBody(model string, n int, seed uint64) []byte {
	fillerOnce.Do(func() {
		r := rand.New(rand.NewPCG(1, 1))
		filler = make([]byte, 8<<20)
		for i := range filler {
			filler[i] = 'a' + byte(r.IntN(26))
		}
	})
	prefix := `{"model":"` + model + `","messages":[{"role":"user","content":"` + strconv.FormatUint(seed, 10) + ` `
	suffix := `"}]}`
	b := make([]byte, n)
	copy(b, prefix)
	copy(b[len(prefix):n-len(suffix)], filler)
	copy(b[n-len(suffix):], suffix)
	return b
}

var (
	fillerOnce sync.Once
	filler     []byte
)

// rawRequest opens a connection and writes the request head.
func rawRequest(t *testing.T, g *gwEnv, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

func readRaw(t *testing.T, conn net.Conn, br *bufio.Reader) (*http.Response, []byte) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// holdUpload starts an upload of n declared bytes and sends only its first
// 8 KiB (fasthttp reads that much with the headers before it calls the
// handler), so the request holds its reservation until the connection
// closes.
func holdUpload(t *testing.T, g *gwEnv, n int64) net.Conn {
	t.Helper()
	return holdUploadTo(t, g, "/v1/chat/completions", n)
}

// holdUploadTo is holdUpload on another body route, with extra headers.
func holdUploadTo(t *testing.T, g *gwEnv, path string, n int64, extra ...string) net.Conn {
	t.Helper()
	before := g.gw.Ingest().InflightBytes()
	conn, _ := rawRequest(t, g, head(path, int(n), extra...))
	io.WriteString(conn, strings.Repeat(" ", 8<<10))
	waitFor(t, "the held reservation", func() bool { return g.gw.Ingest().InflightBytes() == before+n })
	return conn
}

func head(path string, cl int, extra ...string) string {
	h := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
	if cl >= 0 {
		h += "Content-Length: " + strconv.Itoa(cl) + "\r\n"
	} else {
		h += "Transfer-Encoding: chunked\r\n"
	}
	for _, e := range extra {
		h += e + "\r\n"
	}
	return h + "\r\n"
}

// TestBudgetUnderConcurrentUploads: 40 concurrent 4 MiB uploads from 4 keys
// against a 16 MiB budget. Each either reaches the provider byte for byte
// or gets a 503 with a reason and Retry-After; nothing else; and the
// ledger returns to zero.
func TestBudgetUnderConcurrentUploads(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"same-name": {LatencyMS: 150}})
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "16MiB"}, newPressureFeed())
	const n, size = 40, 4 << 20
	type result struct {
		rid, sha       string
		status         int
		code, reason   string
		retryAfter     string
		err            error
		admissionReply string
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := admissionBody("same-name", size, uint64(i))
			rid := fmt.Sprintf("upload-%02d", i)
			req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", fmt.Sprintf("Bearer caller-key-%d", i%4))
			req.Header.Set("X-Request-Id", rid)
			resp, err := g.hc.Do(req)
			r := result{rid: rid, sha: sha(body), err: err}
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r.status, r.retryAfter, r.admissionReply = resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Omniroute-Admission-Reason")
				if resp.StatusCode != 200 {
					r.code, _ = jsonField(t, b, "error", "code").(string)
					r.reason, _ = jsonField(t, b, "error", "reason").(string)
				}
			}
			results[i] = r
		}(i)
	}
	wg.Wait()
	st := mockStats(t)
	byRID := map[string]mockprovider.BodyRecord{}
	for _, b := range st.Bodies {
		byRID[b.Headers["x-request-id"]] = b
	}
	ok, shed := 0, map[string]int{}
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("%s: transport error %v; every upload must get an answer", r.rid, r.err)
		case r.status == 200:
			ok++
			rec, found := byRID[r.rid]
			if !found || rec.SHA256 != r.sha || rec.Bytes != size {
				t.Errorf("%s: answered 200 but the provider got %d bytes sha %s (want %d bytes sha %s)", r.rid, rec.Bytes, rec.SHA256, size, r.sha)
			}
		case r.status == 503:
			shed[r.reason]++
			ra, _ := strconv.Atoi(r.retryAfter)
			if r.code != "chat_admission_busy" || r.reason == "" || r.reason != r.admissionReply || ra < 2 || ra > 60 {
				t.Errorf("%s: 503 code %q reason %q header %q Retry-After %q", r.rid, r.code, r.reason, r.admissionReply, r.retryAfter)
			}
			if _, found := byRID[r.rid]; found {
				t.Errorf("%s: shed, yet it reached the provider", r.rid)
			}
		default:
			t.Errorf("%s: status %d code %q", r.rid, r.status, r.code)
		}
	}
	t.Logf("admitted %d, shed %v, provider max in flight %d", ok, shed, st.Models["same-name"].MaxInflight)
	if ok == 0 || ok == n {
		t.Fatalf("admitted %d of %d: the budget must admit some and shed some", ok, n)
	}
	if mi := st.Models["same-name"].MaxInflight; mi > 4 {
		t.Fatalf("provider saw %d uploads at once; a 16 MiB budget holds at most 4 bodies of 4 MiB", mi)
	}
	h := g.gw.Ingest()
	waitFor(t, "the ledger to return to zero", func() bool {
		return h.InflightBytes() == 0 && h.ActiveHeavy() == 0 && h.Waiting() == 0 && h.QueuedBytes() == 0
	})
	r := g.get("/api/monitoring/health")
	if v := jsonField(t, r.body, "chatAdmission", "inflightBytes"); v != float64(0) {
		t.Fatalf("health inflightBytes %v: %s", v, r.body)
	}
}

func TestExpectContinueDecidedBeforeBody(t *testing.T) {
	resetMock(t)
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB"}, newPressureFeed())
	// Larger than the whole budget: 413 body_exceeds_budget, no body sent.
	conn, br := rawRequest(t, g, head("/v1/chat/completions", 9<<20, "Expect: 100-continue"))
	resp, body := readRaw(t, conn, br)
	if resp.StatusCode != 413 || jsonField(t, body, "error", "code") != "body_exceeds_budget" || resp.Header.Get("X-Request-Id") == "" || !resp.Close {
		t.Fatalf("status %d close %v body %s", resp.StatusCode, resp.Close, body)
	}
	if jsonField(t, body, "error", "message") != "Request body exceeds the chat ingest budget (max 8 MB)." {
		t.Fatalf("message %s", body)
	}
	// Anthropic callers get their dialect.
	conn, br = rawRequest(t, g, head("/v1/messages", 9<<20, "Expect: 100-continue", "Anthropic-Version: 2023-06-01"))
	if resp, body = readRaw(t, conn, br); resp.StatusCode != 413 || jsonField(t, body, "type") != "error" || jsonField(t, body, "error", "code") != "body_exceeds_budget" {
		t.Fatalf("anthropic: %d %s", resp.StatusCode, body)
	}
	// A heavy upload that fits is reserved in the ExpectHandler, continued,
	// and forwarded byte for byte; its reservation comes back.
	payload := admissionBody("same-name", 1<<20, 99)
	conn, br = rawRequest(t, g, head("/v1/chat/completions", len(payload), "Expect: 100-continue", "X-Request-Id: expect-ok"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if g.gw.Ingest().InflightBytes() != int64(len(payload)) {
		t.Fatalf("the reservation is taken before the body is sent: inflight %d", g.gw.Ingest().InflightBytes())
	}
	if _, err := conn.Write(payload); err != nil {
		t.Fatal(err)
	}
	if resp, body = readRaw(t, conn, br); resp.StatusCode != 200 {
		t.Fatalf("continued upload: %d %s", resp.StatusCode, body)
	}
	st := mockStats(t)
	if rec := st.Bodies[len(st.Bodies)-1]; rec.SHA256 != sha(payload) || rec.Headers["x-request-id"] != "expect-ok" {
		t.Fatalf("forwarded body differs")
	}
	waitFor(t, "the reservation to come back", func() bool { return g.gw.Ingest().InflightBytes() == 0 && g.gw.Ingest().ActiveHeavy() == 0 })
	// Authentication and media type are decided before the body too.
	conn, br = rawRequest(t, g, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 1048576\r\nExpect: 100-continue\r\n\r\n")
	if resp, body = readRaw(t, conn, br); resp.StatusCode != 415 {
		t.Fatalf("media type: %d %s", resp.StatusCode, body)
	}
	// A declared size over the hard cap: 413 before the body.
	conn, br = rawRequest(t, g, head("/v1/chat/completions", 60<<20, "Expect: 100-continue"))
	if resp, _ = readRaw(t, conn, br); resp.StatusCode != 413 {
		t.Fatalf("hard cap: %d", resp.StatusCode)
	}
	if s := g.gw.Ingest().Snapshot(); s.ShedsByReason["body_exceeds_budget"] != 2 {
		t.Fatalf("sheds %v", s.ShedsByReason)
	}
}

func TestExpectContinueBusyAndPressure(t *testing.T) {
	feed := newPressureFeed()
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB", "OMNIROUTE_CHAT_ADMISSION_QUEUE_MS": "0"}, feed)
	// Hold the whole budget with an upload whose body never comes.
	hold := holdUpload(t, g, 8<<20)
	conn, br := rawRequest(t, g, head("/v1/chat/completions", 1<<20, "Expect: 100-continue"))
	resp, body := readRaw(t, conn, br)
	if resp.StatusCode != 503 || jsonField(t, body, "error", "code") != "chat_admission_busy" || jsonField(t, body, "error", "reason") != "inflight_bytes_budget" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("busy: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	hold.Close()
	waitFor(t, "the held reservation to come back", func() bool { return g.gw.Ingest().InflightBytes() == 0 })
	setPressure(t, g, feed, 0.99, pressure.Critical)
	conn, br = rawRequest(t, g, head("/v1/chat/completions", 100, "Expect: 100-continue"))
	resp, body = readRaw(t, conn, br)
	if resp.StatusCode != 503 || jsonField(t, body, "error", "code") != "resource_pressure" || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("pressure: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// A light body already arrived whole with its headers: its rejection
	// keeps the connection; a heavy one's closes it without reading on.
	small := `{"model":"echo","messages":[]}`
	conn, br = rawRequest(t, g, head("/v1/messages", len(small))+small)
	if resp, body = readRaw(t, conn, br); resp.StatusCode != 503 || resp.Close || jsonField(t, body, "error", "type") != "overloaded_error" {
		t.Fatalf("light body under pressure: %d close %v %s", resp.StatusCode, resp.Close, body)
	}
	conn, br = rawRequest(t, g, head("/v1/chat/completions", 1<<20)+strings.Repeat(" ", 8<<10))
	if resp, _ = readRaw(t, conn, br); resp.StatusCode != 503 || !resp.Close {
		t.Fatalf("heavy body under pressure: %d close %v", resp.StatusCode, resp.Close)
	}
}

// TestCheckOrder pins the byte stage's order: bypass, critical pressure,
// hard cap, larger than the budget.
func TestCheckOrder(t *testing.T) {
	feed := newPressureFeed()
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{
		"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB", "OMNIROUTE_CHAT_HARD_MAX_BODY_BYTES": "16MiB", "OMNIROUTE_API_KEY": "self-loop-key-123"}, feed)
	bypass := []string{"X-Omniroute-Admission-Bypass: Internal ", "Authorization: Bearer self-loop-key-123"}
	wrongKey := []string{"X-Omniroute-Admission-Bypass: internal", "Authorization: Bearer self-loop-key-124"}
	type tc struct {
		name     string
		critical bool
		cl       int
		extra    []string
		status   int
		code     string
	}
	cases := []tc{
		{"over the hard cap", false, 17 << 20, nil, 413, "payload_too_large"},
		{"over the budget", false, 9 << 20, nil, 413, "body_exceeds_budget"},
		{"bypass skips the budget", false, 9 << 20, bypass, 100, ""},
		{"bypass still has the hard cap", false, 17 << 20, bypass, 413, "payload_too_large"},
		{"a wrong self-loop key is no bypass", false, 9 << 20, wrongKey, 413, "body_exceeds_budget"},
		{"pressure comes before the hard cap", true, 17 << 20, nil, 503, "resource_pressure"},
		{"pressure rejects even light bodies", true, 10, nil, 503, "resource_pressure"},
		{"bypass comes before pressure", true, 9 << 20, bypass, 100, ""},
	}
	for _, c := range cases {
		if c.critical {
			setPressure(t, g, feed, 0.99, pressure.Critical)
		} else {
			setPressure(t, g, feed, 0.1, pressure.Normal)
		}
		conn, br := rawRequest(t, g, head("/v1/chat/completions", c.cl, append([]string{"Expect: 100-continue"}, c.extra...)...))
		if c.status == 100 {
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, err := br.ReadString('\n')
			if err != nil || !strings.Contains(line, " 100 ") {
				t.Fatalf("%s: got %q %v", c.name, line, err)
			}
			if g.gw.Ingest().InflightBytes() != 0 {
				t.Fatalf("%s: a bypassed request reserved budget", c.name)
			}
			conn.Close()
			continue
		}
		resp, body := readRaw(t, conn, br)
		if resp.StatusCode != c.status || jsonField(t, body, "error", "code") != c.code {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body)
		}
	}
}

func TestChunkedUploads(t *testing.T) {
	resetMock(t)
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB"}, newPressureFeed())
	// Within the budget: reserved as it crosses the threshold, forwarded
	// byte for byte.
	payload := admissionBody("same-name", 3<<20, 7)
	req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", io.MultiReader(bytes.NewReader(payload)))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	resp, err := g.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chunked: %d", resp.StatusCode)
	}
	st := mockStats(t)
	if rec := st.Bodies[len(st.Bodies)-1]; rec.SHA256 != sha(payload) {
		t.Fatal("chunked body changed on the way")
	}
	if s := g.gw.Ingest().SlowPathRequests(); s != 0 {
		t.Fatalf("an uncontended chunked upload queued %d times", s)
	}
	waitFor(t, "the reservation to come back", func() bool { return g.gw.Ingest().InflightBytes() == 0 })
	// Over the budget: 413 as soon as the running total crosses it; the
	// rest is never read.
	answer, body, sent := sendChunked(t, g, "/v1/chat/completions")
	if answer.StatusCode != 413 || jsonField(t, body, "error", "code") != "body_exceeds_budget" {
		t.Fatalf("chunked over budget: %d %s", answer.StatusCode, body)
	}
	if sent >= chunkedUpload {
		t.Fatalf("the gateway read all %d bytes before answering", sent)
	}
	waitFor(t, "the reservation to come back", func() bool { return g.gw.Ingest().InflightBytes() == 0 && g.gw.Ingest().ActiveHeavy() == 0 })
}

// chunkedUpload is how much sendChunked offers: far more than any budget
// a test sets, and more than the sockets between client and gateway hold.
const chunkedUpload = 64 << 20

// sendChunked uploads up to chunkedUpload bytes chunked to path (1 MiB
// chunks, extra headers added) until the gateway answers, and returns the
// answer and how many bytes were sent by then. The client stops sending
// once it has its answer, as real clients do.
func sendChunked(t *testing.T, g *gwEnv, path string, extra ...string) (*http.Response, []byte, int) {
	t.Helper()
	conn, br := rawRequest(t, g, head(path, -1, extra...))
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	sent := 0
	var answer *http.Response
	var body []byte
	var readErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if answer, readErr = http.ReadResponse(br, nil); readErr == nil {
			body, _ = io.ReadAll(answer.Body)
		}
		conn.Close() // a client that got its answer stops sending
	}()
send:
	for sent < chunkedUpload {
		if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
			break
		}
		sent += len(chunk)
		select {
		case <-done:
			break send
		default:
		}
	}
	<-done
	if readErr != nil {
		t.Fatal(readErr)
	}
	return answer, body, sent
}

func TestCriticalPressureAbortsUploadBeingRead(t *testing.T) {
	feed := newPressureFeed()
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "32MiB"}, feed)
	small := holdUpload(t, g, 2<<20)
	big, bigR := rawRequest(t, g, head("/v1/chat/completions", 20<<20))
	io.WriteString(big, `{"model":"same-name","messages":[{"content":"`+strings.Repeat("y", 1<<20))
	waitFor(t, "both reservations", func() bool { return g.gw.Ingest().InflightBytes() == 22<<20 })
	// One critical observation; the sampler's own samples (each second)
	// stay normal, so exactly one abort round runs.
	crit := feed.sample()
	crit.GoUsed = 990
	g.gw.Pressure().Observe(crit)
	resp, body := readRaw(t, big, bigR)
	if resp.StatusCode != 503 || jsonField(t, body, "error", "code") != "resource_pressure" || !resp.Close {
		t.Fatalf("aborted upload: %d %s", resp.StatusCode, body)
	}
	// The 20 MiB upload is more than half of what was being read: the 2 MiB
	// one keeps its reservation until the next critical sample.
	waitFor(t, "the aborted reservation to come back", func() bool { return g.gw.Ingest().InflightBytes() == 2<<20 })
	small.Close()
	waitFor(t, "all reservations to come back", func() bool { return g.gw.Ingest().InflightBytes() == 0 })
	if n := g.gw.Ingest().Snapshot().ShedsByReason["resource_pressure"]; n != 1 {
		t.Fatalf("resource_pressure sheds %d", n)
	}
}

func TestStructuralStage(t *testing.T) {
	resetMock(t)
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{
		"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB", "OMNIROUTE_CHAT_ADMISSION_QUEUE_MS": "0",
		"OMNIROUTE_CHAT_HARD_MAX_MESSAGES": "5", "OMNIROUTE_CHAT_HEAVY_MESSAGE_COUNT": "3", "OMNIROUTE_CHAT_HEAVY_ESTIMATED_TOKENS": "1000"}, newPressureFeed())
	msgs := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"role":"user","content":"hi"}`
		}
		return `{"model":"same-name","messages":[` + strings.Join(parts, ",") + `]}`
	}
	r := g.post("/v1/chat/completions", msgs(6))
	if r.status != 413 || jsonField(t, r.body, "error", "code") != "chat_history_too_large" || jsonField(t, r.body, "error", "reason") != "message_limit" {
		t.Fatalf("history: %d %s", r.status, r.body)
	}
	if !strings.Contains(string(jsonField(t, r.body, "error", "message").(string)), "5-message limit") {
		t.Fatalf("message %s", r.body)
	}
	// Heavy by count, by tokens, and light: all admitted while there is room.
	longText := `{"model":"same-name","messages":[{"role":"user","content":"` + strings.Repeat("word ", 1000) + `"}]}`
	for _, b := range []string{msgs(4), longText, msgs(1)} {
		if r := g.post("/v1/chat/completions", b); r.status != 200 {
			t.Fatalf("with room: %d %s", r.status, r.body)
		}
	}
	waitFor(t, "leases back", func() bool { return g.gw.Ingest().ActiveHeavy() == 0 })
	// With the budget held, structurally heavy requests are refused; light
	// ones still pass.
	hold := holdUpload(t, g, 8<<20)
	defer hold.Close()
	for _, b := range []string{msgs(4), longText} {
		r := g.post("/v1/chat/completions", b)
		ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != 503 || jsonField(t, r.body, "error", "reason") != "structure_limit" || ra < 1 {
			t.Fatalf("structural busy: %d %v %s", r.status, r.header, r.body)
		}
	}
	if r := g.post("/v1/chat/completions", msgs(1)); r.status != 200 {
		t.Fatalf("light while full: %d %s", r.status, r.body)
	}
}

func TestClientLeavingQueueIsNotShed(t *testing.T) {
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{
		"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB", "OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT": "1",
		"OMNIROUTE_CHAT_ADMISSION_HEALTHY_HEADROOM": "0", "OMNIROUTE_CHAT_ADMISSION_QUEUE_MS": "20000"}, newPressureFeed())
	hold := holdUpload(t, g, 1<<20)
	defer hold.Close()
	waiter, _ := rawRequest(t, g, head("/v1/chat/completions", 1<<20, "Authorization: Bearer waiting-key"))
	io.WriteString(waiter, strings.Repeat(" ", 8<<10))
	waitFor(t, "a waiter", func() bool { return g.gw.Ingest().Waiting() == 1 })
	r := g.get("/api/monitoring/health")
	lanes, _ := jsonField(t, r.body, "chatAdmission", "lanes").([]any)
	if len(lanes) != 1 || !strings.HasPrefix(lanes[0].(map[string]any)["key"].(string), "key_") || strings.Contains(string(r.body), "waiting-key") {
		t.Fatalf("lanes must show the opaque key only: %s", r.body)
	}
	start := time.Now()
	waiter.Close()
	waitFor(t, "the waiter to leave", func() bool { return g.gw.Ingest().Waiting() == 0 })
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("leaving took %v", d)
	}
	if s := g.gw.Ingest().Snapshot(); s.ShedTotal != 0 || s.QueuedBytes != 0 {
		t.Fatalf("a client that left was shed: %+v", s)
	}
}

func TestAdmissionHealthAndMetrics(t *testing.T) {
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB"}, newPressureFeed())
	conn, br := rawRequest(t, g, head("/v1/chat/completions", 9<<20))
	io.WriteString(conn, strings.Repeat(" ", 8<<10))
	readRaw(t, conn, br)
	r := g.get("/api/monitoring/health")
	want := []string{"activeHeavy", "activeHealthyHeadroom", "waiting", "queuedBytes", "shedTotal", "shedsByReason", "lanes",
		"inflightBytes", "maxInflightBytes", "budgetSource", "pressureSeverity", "pressureReason", "countCapEnabled"}
	sec, _ := jsonField(t, r.body, "chatAdmission").(map[string]any)
	if len(sec) != len(want) {
		t.Fatalf("chatAdmission has %d fields, want exactly %v: %s", len(sec), want, r.body)
	}
	for _, k := range want {
		if _, ok := sec[k]; !ok {
			t.Fatalf("chatAdmission lacks %s: %s", k, r.body)
		}
	}
	if sec["budgetSource"] != "override" || sec["maxInflightBytes"] != float64(8<<20) || sec["shedTotal"] != float64(1) || sec["countCapEnabled"] != false {
		t.Fatalf("chatAdmission %v", sec)
	}
	for _, k := range []string{"queue_timeout", "queued_bytes_budget", "body_exceeds_budget", "inflight_bytes_budget", "resource_pressure"} {
		if _, ok := sec["shedsByReason"].(map[string]any)[k]; !ok {
			t.Fatalf("shedsByReason lacks %s", k)
		}
	}
	m := string(g.get("/metrics").body)
	for _, w := range []string{"omniroute_chat_admission_inflight_bytes 0", "omniroute_chat_admission_max_inflight_bytes 8388608",
		`omniroute_chat_admission_budget_info{source="override"} 1`, `omniroute_chat_admission_sheds_total{reason="body_exceeds_budget"} 1`,
		"omniroute_chat_admission_sheds_total 1", "omniroute_chat_admission_waiting 0", "omniroute_chat_admission_active_heavy 0",
		"omniroute_resource_pressure_severity 0", `omniroute_resource_pressure_reason{reason="none"} 1`, "omniroute_chat_admission_count_cap 0"} {
		if !strings.Contains(m, w) {
			t.Fatalf("metrics lack %q", w)
		}
	}
}

// TestStreamReturnsBytesAtCommit: a committed stream no longer holds its
// body, so its bytes go back while the heavy slot stays until it ends.
func TestStreamReturnsBytesAtCommit(t *testing.T) {
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"same-name": {ChunkCount: 4, ChunkGapMS: 150}})
	g := startAdmissionGateway(t, testFile(t, ""), map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "8MiB"}, newPressureFeed())
	body := admissionBody("same-name", 1<<20, 3)
	body = append(body[:len(body)-1], `,"stream":true}`...)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, g.base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	h := g.gw.Ingest()
	if h.InflightBytes() != 0 || h.ActiveHeavy() != 1 {
		t.Fatalf("during the stream: inflight %d heavy %d; want the bytes back and the slot held", h.InflightBytes(), h.ActiveHeavy())
	}
	io.Copy(io.Discard, resp.Body)
	waitFor(t, "the slot to come back", func() bool { return h.ActiveHeavy() == 0 })
}
