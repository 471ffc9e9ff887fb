package transport_test

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// TestStreamCutByTotalTimeoutEndsInBand: a stream still running when
// OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS ends is cut there, and the caller
// gets the surface's in-band error saying so (the write deadline, capped
// by the same limit, leaves the frame time to be written), never a
// stream that just stops.
func TestStreamCutByTotalTimeoutEndsInBand(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, `,
    "long": {"targets": [{"connection": "mock/a", "model": "m-long"}]}`), map[string]string{
		"OMNIROUTE_UPSTREAM_TOTAL_TIMEOUT_MS": "1500", "OMNIROUTE_UPSTREAM_TTFB_TIMEOUT_MS": "1000"})
	setBehavior(t, map[string]mockprovider.Behavior{"m-long": {ChunkCount: 40, ChunkGapMS: 150}}) // about 6 s
	for _, tc := range []struct {
		path  string
		check func(evs [][2]string) bool
	}{
		{"/v1/chat/completions", func(evs [][2]string) bool {
			return strings.Contains(evs[len(evs)-1][1], `"code":"stream_interrupted"`)
		}},
		{"/v1/messages", func(evs [][2]string) bool { return evs[len(evs)-1][0] == "error" }},
		{"/v1/responses", func(evs [][2]string) bool {
			return evs[len(evs)-2][0] == "error" && evs[len(evs)-1][0] == "response.failed"
		}},
	} {
		r := g.post(tc.path, `{"model":"long","stream":true,"messages":[],"input":"x","max_tokens":5}`)
		evs := sseEvents(r.body)
		if r.status != 200 || len(evs) < 3 || !tc.check(evs) || !strings.Contains(string(r.body), "time limit") {
			t.Fatalf("%s: status %d, events %q", tc.path, r.status, evs)
		}
	}
}
