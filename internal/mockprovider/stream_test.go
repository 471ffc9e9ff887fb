package mockprovider

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStreamFaults reads raw SSE bodies to check exactly what reaches the
// wire for each stream fault.
func TestStreamFaults(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		fail       FailSpec
		wantFrames int    // frames received
		wantBroken bool   // body read ends in an error (not a clean end)
		wantLast   string // substring of the last frame
		outcome    string // counter that must be 1
	}{
		{"chat complete", chatPath, FailSpec{}, 1 + 4 + 1 + 1, false, "[DONE]", "completed"},
		{"chat reset after 2", chatPath, FailSpec{Mode: FailReset, AfterChunks: 2}, 1 + 2, true, `"content"`, "failed"},
		{"chat truncate after 3", chatPath, FailSpec{Mode: FailTruncate, AfterChunks: 3}, 1 + 3, false, `"content"`, "failed"},
		{"chat truncate before anything", chatPath, FailSpec{Mode: FailTruncate, AfterChunks: -1}, 0, false, "", "failed"},
		{"chat error after 1", chatPath, FailSpec{Mode: FailErrorEvent, AfterChunks: 1, Status: 500}, 1 + 1 + 1, false, `data: {"error":{`, "failed"},
		{"chat error first", chatPath, FailSpec{Mode: FailErrorEvent, AfterChunks: -1}, 1, false, `data: {"error":{`, "failed"},
		{"anthropic reset after 1", messagesPath, FailSpec{Mode: FailReset, AfterChunks: 1}, 3 + 1, true, "content_block_delta", "failed"},
		{"anthropic truncate after 4", messagesPath, FailSpec{Mode: FailTruncate, AfterChunks: 4}, 3 + 4, false, "content_block_delta", "failed"},
		{"anthropic error after 0", messagesPath, FailSpec{Mode: FailErrorEvent}, 3 + 1, false, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"", "failed"},
		{"responses error after 2", responsesPath, FailSpec{Mode: FailErrorEvent, AfterChunks: 2}, 4 + 2 + 1, false, `"type":"error","sequence_number":6`, "failed"},
		{"responses truncate after 9", responsesPath, FailSpec{Mode: FailTruncate, AfterChunks: 9}, 4 + 4, false, "response.output_text.delta", "failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Behavior{})
			e.setModels(t, map[string]Behavior{"m": {ChunkCount: 4, Fail: tc.fail}})
			r := e.mustPost(t, tc.path, `{"model":"m","stream":true}`)
			if r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("content type %q", ct)
			}
			frames := sseFrames(r.body)
			if broken := r.readErr != nil; broken != tc.wantBroken {
				t.Errorf("read error = %v, want broken=%t", r.readErr, tc.wantBroken)
			}
			if len(frames) != tc.wantFrames {
				t.Fatalf("got %d frames, want %d:\n%s", len(frames), tc.wantFrames, r.body)
			}
			if tc.wantFrames > 0 && !strings.Contains(frames[len(frames)-1], tc.wantLast) {
				t.Errorf("last frame %q does not contain %q", frames[len(frames)-1], tc.wantLast)
			}
			st := e.waitStats(t, "request ended", func(s Stats) bool { return s.Totals.Inflight == 0 })
			got := map[string]int64{"completed": st.Totals.Completed, "failed": st.Totals.Failed, "cancelled": st.Totals.Cancelled}
			for k, v := range got {
				want := int64(0)
				if k == tc.outcome {
					want = 1
				}
				if v != want {
					t.Errorf("%s = %d, want %d (totals %+v)", k, v, want, st.Totals)
				}
			}
		})
	}
}

// TestResetNonStream checks that reset aborts before any response bytes.
func TestResetNonStream(t *testing.T) {
	for _, body := range []string{`{"model":"m"}`, `{"model":"m","stream":true}`} {
		e := newEnv(t, Behavior{Fail: FailSpec{Mode: FailReset, AfterChunks: -1}})
		_, err := e.post(t, context.Background(), chatPath, body)
		if err == nil {
			t.Errorf("%s: request succeeded, want a transport error", body)
		}
		if st := e.stats(t); st.Totals.Failed != 1 {
			t.Errorf("%s: totals %+v, want 1 failed", body, st.Totals)
		}
	}
}

// TestTruncateNonStream checks that the body stops short of Content-Length.
func TestTruncateNonStream(t *testing.T) {
	e := newEnv(t, Behavior{Fail: FailSpec{Mode: FailTruncate}})
	r := e.mustPost(t, chatPath, `{"model":"m"}`)
	if r.status != 200 || !errors.Is(r.readErr, io.ErrUnexpectedEOF) {
		t.Errorf("got %d, read error %v; want 200 and unexpected EOF", r.status, r.readErr)
	}
	if len(r.body) == 0 || !strings.HasPrefix(string(r.body), `{"id":"chatcmpl-mock-`) {
		t.Errorf("partial body = %q", r.body)
	}
}

// TestStreamOneChunkPerEvent checks that every SSE event arrives in its own
// HTTP chunk, flushed as written: the client can read the first event while
// the mock is still pacing the rest.
func TestStreamOneChunkPerEvent(t *testing.T) {
	e := newEnv(t, Behavior{ChunkCount: 3, ChunkGapMS: 60000})
	req, err := http.NewRequest(http.MethodPost, e.base+chatPath, strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	br := bufio.NewReader(resp.Body)
	var lines []string
	for len(lines) < 4 { // role frame + first delta, then the gap
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		lines = append(lines, line)
	}
	if !strings.Contains(lines[0], `"role":"assistant"`) || !strings.Contains(lines[2], `"content":"Hello`) {
		t.Errorf("first frames = %q", lines)
	}
}
