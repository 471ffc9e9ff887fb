package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

// TestKillNineKeepsEveryRowBeforeTheLastCommit runs the real command (the
// embedded configuration, its request log in the database), loads it
// with eight callers, kills it with SIGKILL in the middle of the load and
// starts it again on the same data directory. The log's writer commits in
// the order requests were handed over, and a request's record is handed
// over before its answer is sent; so if any committed request arrived
// after request m was answered, m's record was committed before it. The
// test checks exactly that: every answered request whose answer came
// before the arrival of the last committed request has its row (none lost
// anywhere but in the tail). How large the tail was (the records the
// commit interval had not reached) is measured and logged, not asserted:
// it is a time, and a busy machine stretches it.
func TestKillNineKeepsEveryRowBeforeTheLastCommit(t *testing.T) {
	dir := t.TempDir()
	since := time.Now().Add(-time.Minute).UTC()
	cmd, addr, stderr := startServe(t, "OMNIROUTE_CONFIG=", "OMNIROUTE_DATA_DIR="+dir)
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill() //nolint:errcheck
			cmd.Wait()         //nolint:errcheck
		}
	}()

	type answer struct {
		id string
		at time.Time
	}
	var mu sync.Mutex
	var answered []answer
	stop := testutil.Callers(8, 10*time.Second, func(_ int, hc *http.Client) bool {
		resp, err := hc.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hello"}]}`))
		if err != nil {
			return false // killed
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		at := time.Now().Round(0) // the wall clock, comparable with the gateway's
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), `"chat.completion"`) {
			return true
		}
		mu.Lock()
		answered = append(answered, answer{resp.Header.Get("X-Request-Id"), at})
		mu.Unlock()
		return true
	})
	// Load for three seconds (and at least 1,000 answers, up to 20 s on a
	// slow machine), then SIGKILL under it.
	start := time.Now()
	for {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		n := len(answered)
		mu.Unlock()
		if n >= 1000 && time.Since(start) >= 3*time.Second || time.Since(start) > 20*time.Second {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now().Round(0)
	cmd.Wait() //nolint:errcheck
	killed = true
	stop()
	if len(answered) < 100 {
		t.Fatalf("only %d requests answered before the kill; stderr %s", len(answered), stderr.String())
	}

	// Restart on the same directory: the database opens (the WAL is
	// replayed) and the request log API lists what was committed.
	cmd2, addr2, stderr2 := startServe(t, "OMNIROUTE_CONFIG=", "OMNIROUTE_DATA_DIR="+dir)
	defer func() {
		cmd2.Process.Signal(syscall.SIGTERM) //nolint:errcheck
		cmd2.Wait()                          //nolint:errcheck
	}()
	rows := map[string]time.Time{} // request id → arrival
	var lastArrival, lastHandover time.Time
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	q := url.Values{"since": {since.Format(time.RFC3339Nano)}, "limit": {"1000"}}
	for pages := 0; ; pages++ {
		resp, err := hc.Get("http://" + addr2 + "/api/requests?" + q.Encode())
		if err != nil {
			t.Fatalf("request log after the restart: %v; stderr %s", err, stderr2.String())
		}
		var page struct {
			Requests []struct {
				RequestID string    `json:"requestId"`
				Time      time.Time `json:"time"`
				LatencyMs float64   `json:"latencyMs"`
				Status    int       `json:"status"`
			} `json:"requests"`
			Next string `json:"next"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || pages > 1000 {
			t.Fatalf("page %d: %d %v", pages, resp.StatusCode, err)
		}
		for _, r := range page.Requests {
			rows[r.RequestID] = r.Time
			if r.Time.After(lastArrival) {
				lastArrival = r.Time
			}
			if h := r.Time.Add(time.Duration(r.LatencyMs * float64(time.Millisecond))); h.After(lastHandover) {
				lastHandover = h
			}
		}
		if page.Next == "" {
			break
		}
		q.Set("cursor", page.Next)
	}

	var lost, tail int
	for _, a := range answered {
		if _, ok := rows[a.id]; ok {
			continue
		}
		lost++
		if a.at.Before(lastArrival) {
			t.Errorf("request %s was answered at %s, before the arrival of a committed request (%s), and has no row",
				a.id, a.at.Format(time.RFC3339Nano), lastArrival.Format(time.RFC3339Nano))
		}
		if a.at.After(lastHandover) {
			tail++
		}
	}
	if len(rows) == 0 {
		t.Fatal("no row survived the kill")
	}
	t.Logf("answered %d, rows %d, answered without a row %d (%.2f%%; %d answered after the last committed hand-over); "+
		"the kill came %v after the last committed request's hand-over",
		len(answered), len(rows), lost, 100*float64(lost)/float64(len(answered)), tail, killedAt.Sub(lastHandover).Round(time.Millisecond))
}
