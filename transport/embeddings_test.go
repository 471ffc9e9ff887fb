package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// embeddingsGateway serves embeddings from a provider that lists
// "embeddings" in its apis, under a model with an alias, beside the
// harness's Anthropic-only model "claude", on a freshly reset mock.
func embeddingsGateway(t *testing.T) *gwEnv {
	t.Helper()
	resetMock(t)
	f := testFileWith(t, `,
    "emb": {"base_url": "http://`+mock.Addr+`/v1", "apis": ["embeddings"],
      "connections": {"main": {"api_key_env": "TEST_KEY_A"}}}`, `,
    "embed": {"targets": [{"connection": "emb", "model": "text-embedding-3-small"}]},
    "embed-broken": {"targets": [{"connection": "emb", "model": "m-emb-broken"}]}`)
	f.Aliases = map[string]string{"text-embedding-ada-002": "embed"}
	f.Auth.Mode, f.Auth.AllowAnonymous = "keys", false
	f.Tenants = append(f.Tenants, tenantWithSHA("sdk", sdkKey))
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, f, nil)
	setBehavior(t, map[string]mockprovider.Behavior{
		"m-emb-broken": {Fail: mockprovider.FailSpec{Mode: "status", Status: 400, Code: "context_length_exceeded"}},
	})
	return g
}

// TestSDKOpenAIEmbeddings: openai-go's Embeddings.New through the
// gateway gets the provider's vectors unchanged, through an alias, with
// the provider's usage; the provider saw the configured upstream name and
// its own key; the request is counted like any other.
func TestSDKOpenAIEmbeddings(t *testing.T) {
	g := embeddingsGateway(t)
	client := g.openai()
	ctx := context.Background()
	var hdr *http.Response
	resp, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "text-embedding-ada-002",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first input", "second"}},
	}, option.WithResponseInto(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Model != "text-embedding-ada-002" || resp.Usage.PromptTokens != 5 {
		t.Fatalf("answer %+v", resp)
	}
	for i, in := range []string{`"first input"`, `"second"`} {
		want := mockprovider.EmbeddingVector([]byte(in), mockprovider.DefaultEmbeddingDims)
		got := resp.Data[i].Embedding
		if len(got) != len(want) {
			t.Fatalf("data[%d] has %d numbers, want %d", i, len(got), len(want))
		}
		for j := range got {
			if float32(got[j]) != want[j] {
				t.Fatalf("data[%d][%d] = %v, want the provider's %v", i, j, got[j], want[j])
			}
		}
	}
	if hdr.Header.Get("X-OmniRoute-Target") != "emb/main/text-embedding-3-small" || hdr.Header.Get("X-Request-Id") == "" {
		t.Errorf("headers %v", hdr.Header)
	}
	st := mockStats(t)
	last := st.Bodies[len(st.Bodies)-1]
	if last.Path != "/v1/embeddings" || last.Model != "text-embedding-3-small" || last.Headers["authorization"] != "Bearer upstream-key-a" {
		t.Errorf("the provider saw %s model %s auth %q", last.Path, last.Model, last.Headers["authorization"])
	}
	if m := g.get("/metrics"); !strings.Contains(string(m.body), `omniroute_requests_total{route="embeddings",status="200"} 1`) {
		t.Errorf("metrics do not count the embeddings request:\n%s", m.body)
	}
	// The request log has it, with its usage (written in batches: wait).
	deadline := time.Now().Add(5 * time.Second)
	for {
		var page struct {
			Requests []struct {
				Model         string `json:"model"`
				CallerDialect string `json:"callerDialect"`
				Status        int    `json:"status"`
				TokensIn      int64  `json:"tokensIn"`
			} `json:"requests"`
		}
		r := g.get("/api/requests?tenant=sdk")
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatalf("request log: %d %s", r.status, r.body)
		}
		if len(page.Requests) == 1 {
			rec := page.Requests[0]
			if rec.Model != "embed" || rec.CallerDialect != "embeddings" || rec.Status != 200 || rec.TokensIn != 5 {
				t.Errorf("request log record %+v", rec)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request log has no embeddings record: %s", r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEmbeddingsErrors: refusals and provider errors reach openai-go as
// its own *openai.Error with the OpenAI shape.
func TestEmbeddingsErrors(t *testing.T) {
	g := embeddingsGateway(t)
	client := g.openai()
	ctx := context.Background()
	in := openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")}
	for _, tc := range []struct {
		name, model string
		status      int
		code, msg   string
	}{
		// claude's only provider speaks Anthropic Messages: no embeddings.
		{"anthropic-only model", "claude", 400, "unsupported_api_format", `has no target whose provider serves embeddings`},
		{"unknown model", "nope", 404, "model_not_found", `"nope"`},
		{"provider error passed through", "embed-broken", 400, "context_length_exceeded", "mockprovider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: tc.model, Input: in})
			var oe *openai.Error
			if !errors.As(err, &oe) {
				t.Fatalf("err %v is not an *openai.Error", err)
			}
			if oe.StatusCode != tc.status || oe.Code != tc.code || !strings.Contains(oe.Message, tc.msg) {
				t.Fatalf("status %d code %q message %q, want %d %q containing %q", oe.StatusCode, oe.Code, oe.Message, tc.status, tc.code, tc.msg)
			}
		})
	}
	// No embeddings call ever reaches a chat, messages or responses
	// endpoint (nothing is translated), and stream is refused.
	for _, b := range mockStats(t).Bodies {
		if b.Path != "/v1/embeddings" {
			t.Errorf("the mock was asked %s", b.Path)
		}
	}
	r := g.post("/v1/embeddings", `{"model":"embed","input":"x","stream":true}`, "Authorization", "Bearer "+sdkKey)
	if r.status != 400 || jsonField(t, r.body, "error", "code") != "invalid_field" {
		t.Errorf("stream: %d %s", r.status, r.body)
	}
	// A chat call to the embeddings-only model is refused, not translated.
	r = g.post("/v1/chat/completions", `{"model":"embed","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+sdkKey)
	if r.status != 400 || jsonField(t, r.body, "error", "code") != "unsupported_api_format" {
		t.Errorf("chat to an embeddings model: %d %s", r.status, r.body)
	}
}
