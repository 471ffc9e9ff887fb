package mockprovider

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestLatencyJitter(t *testing.T) {
	if err := (Behavior{LatencyJitterMS: -1}).Validate(); err == nil {
		t.Fatal("negative jitter accepted")
	}
	s := New(Options{})
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetBehavior(BehaviorUpdate{Models: map[string]Behavior{"j": {LatencyMS: 10, LatencyJitterMS: 60}}}); err != nil {
		t.Fatal(err)
	}
	var lo, hi time.Duration = time.Hour, 0
	for i := 0; i < 12; i++ {
		start := time.Now()
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"j","messages":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		d := time.Since(start)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 10*time.Millisecond || hi-lo < 10*time.Millisecond {
		t.Fatalf("latencies %v..%v: want at least 10 ms and a spread", lo, hi)
	}
}
