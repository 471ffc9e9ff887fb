package mockprovider

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestBodiesRecordExactBytes(t *testing.T) {
	e := newEnv(t, Behavior{})
	bodies := []string{
		`{"model":"a","messages":[{"role":"user","content":"héllo"}]}`,
		"{\n  \"model\" : \"b\",\n  \"stream\": false\n}\n",
		`{"model":"a\u002fescaped"}`,
	}
	for i, b := range bodies {
		path := chatPath
		if i == 1 {
			path = messagesPath
		}
		if r := e.mustPost(t, path, b, "X-Test-Id", "t"+string(rune('0'+i)), "Anthropic-Version", "2026-10-21"); r.status != 200 {
			t.Fatalf("post %d: %d %s", i, r.status, r.body)
		}
	}
	st := e.stats(t)
	if len(st.Bodies) != len(bodies) {
		t.Fatalf("recorded %d bodies, want %d", len(st.Bodies), len(bodies))
	}
	wantModels := []string{"a", "b", "a/escaped"}
	var total int64
	for i, rec := range st.Bodies {
		sum := sha256.Sum256([]byte(bodies[i]))
		if rec.SHA256 != hex.EncodeToString(sum[:]) || rec.Bytes != len(bodies[i]) || rec.Seq != uint64(i+1) {
			t.Errorf("record %d = %+v, want sha %x bytes %d", i, rec, sum, len(bodies[i]))
		}
		if rec.Model != wantModels[i] || rec.Headers["x-test-id"] != "t"+string(rune('0'+i)) ||
			rec.Headers["anthropic-version"] != "2026-10-21" || rec.Headers["content-type"] != "application/json" {
			t.Errorf("record %d model %q headers %v", i, rec.Model, rec.Headers)
		}
		total += int64(len(bodies[i]))
	}
	if st.Bodies[1].Path != messagesPath {
		t.Errorf("path = %q", st.Bodies[1].Path)
	}
	if st.Totals.BytesIn != total || st.Models["a"].Requests != 1 || st.Models["a/escaped"].Requests != 1 {
		t.Errorf("totals %+v models %v", st.Totals, st.Models)
	}
}

func TestBodyLogKeepsLast1000(t *testing.T) {
	srv := New(Options{})
	for i := range 1005 {
		sum := [32]byte{}
		srv.bodies.add(uint64(i+1), []byte("/p"), "m", i, &sum, &fasthttp.RequestHeader{})
	}
	recs := srv.Stats().Bodies
	if len(recs) != 1000 || recs[0].Seq != 6 || recs[999].Seq != 1005 {
		t.Errorf("got %d records from seq %d to %d", len(recs), recs[0].Seq, recs[len(recs)-1].Seq)
	}
}

func TestAdminReset(t *testing.T) {
	e := newEnv(t, Behavior{Text: "initial"})
	if err := e.admin.SetBehavior(BehaviorUpdate{
		Default: &Behavior{Text: "changed"},
		Models:  map[string]Behavior{"bad": {Fail: FailSpec{Mode: FailStatus, Status: 500}}},
	}); err != nil {
		t.Fatal(err)
	}
	if r := e.mustPost(t, chatPath, `{"model":"bad"}`); r.status != 500 {
		t.Fatalf("configured failure not applied: %d", r.status)
	}
	if r := e.mustPost(t, chatPath, `{"model":"x"}`); !strings.Contains(string(r.body), `"changed"`) {
		t.Fatalf("default not changed: %s", r.body)
	}
	if err := e.admin.Reset(); err != nil {
		t.Fatal(err)
	}
	st := e.stats(t)
	if st.Totals != (Counters{}) || len(st.Models) != 0 || len(st.Bodies) != 0 {
		t.Errorf("after reset: %+v", st)
	}
	if r := e.mustPost(t, chatPath, `{"model":"bad"}`); r.status != 200 || !strings.Contains(string(r.body), `"initial"`) {
		t.Errorf("after reset got %d %s, want the start-up default", r.status, r.body)
	}
}

func TestAdminBehaviorMergeReplaceAndValidation(t *testing.T) {
	e := newEnv(t, Behavior{})
	must := func(u BehaviorUpdate) {
		t.Helper()
		if err := e.admin.SetBehavior(u); err != nil {
			t.Fatal(err)
		}
	}
	must(BehaviorUpdate{Models: map[string]Behavior{"a": {Text: "A"}}})
	must(BehaviorUpdate{Models: map[string]Behavior{"b": {Text: "B"}}})
	if r := e.mustPost(t, chatPath, `{"model":"a"}`); !strings.Contains(string(r.body), `"A"`) {
		t.Errorf("merge lost model a: %s", r.body)
	}
	must(BehaviorUpdate{Models: map[string]Behavior{"b": {Text: "B2"}}, Replace: true})
	if r := e.mustPost(t, chatPath, `{"model":"a"}`); strings.Contains(string(r.body), `"A"`) {
		t.Errorf("replace kept model a: %s", r.body)
	}
	for _, bad := range []string{
		`{"models":{"x":{"fail":{"mode":"explode"}}}}`,
		`{"models":{"x":{"latency":5}}}`, // unknown field
		`{"default":{"over_slots":"drop"}}`,
		`{"default":{"rate_limit":{"family":"gemini"}}}`,
		`not json`,
	} {
		r := e.mustPost(t, "/_mock/behavior", bad)
		if r.status != 400 {
			t.Errorf("%s: got %d %s, want 400", bad, r.status, r.body)
		}
	}
}

func TestHealth(t *testing.T) {
	e := newEnv(t, Behavior{})
	h, err := e.admin.Health()
	if err != nil {
		t.Fatal(err)
	}
	if h.Service != ServiceName || h.Status != "ok" || h.PID != os.Getpid() || h.Instance != InstanceID() || len(h.Instance) != 16 {
		t.Errorf("health = %+v", h)
	}
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, Behavior{})
	tests := []struct {
		path, body, want string
		status           int
	}{
		{chatPath, `not json`, `{"error":{"message":"mockprovider: request body is not valid JSON`, 400},
		{chatPath, `{"messages":[]}`, `"type":"invalid_request_error"`, 400},
		{responsesPath, `{"model":""}`, `no string \"model\"`, 400},
		{messagesPath, `{"model":1}`, `{"type":"error","error":{"type":"invalid_request_error"`, 400},
		{messagesPath, `[1,2]`, `must be a JSON object`, 400},
		{"/v1/embeddings", `{"model":"m"}`, `input must be`, 400},
		{"/v1/audio/speech", `{"model":"m"}`, `no route`, 404},
		{"/_mock/nothing", `{}`, `no admin route`, 404},
	}
	for _, tc := range tests {
		r := e.mustPost(t, tc.path, tc.body)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s %s: got %d %s, want %d containing %s", tc.path, tc.body, r.status, r.body, tc.status, tc.want)
		}
	}
	if st := e.stats(t); st.Totals.Requests != 6 || st.Totals.Failed != 6 {
		t.Errorf("totals %+v, want 6 failed requests", st.Totals)
	}
}

func TestModelList(t *testing.T) {
	e := newEnv(t, Behavior{})
	e.setModels(t, map[string]Behavior{"zeta": {}, "alpha": {}})
	resp, err := e.hc.Get(e.base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	decodeJSONReader(t, resp.Body, &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if list.Object != "list" || strings.Join(ids, ",") != "mock-model,alpha,zeta" {
		t.Errorf("list = %+v", list)
	}
}
