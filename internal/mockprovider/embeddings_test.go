package mockprovider

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestEmbeddings: the official SDK gets one unit vector per input, in
// order, equal to EmbeddingVector of the input's JSON text, with usage;
// bad requests are 400 in the OpenAI shape.
func TestEmbeddings(t *testing.T) {
	e := newEnv(t, Behavior{})
	client := e.openai()
	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello", "world"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Model != "text-embedding-3-small" || resp.Usage.PromptTokens != 4 || resp.Usage.TotalTokens != 4 {
		t.Fatalf("answer %+v", resp)
	}
	for i, in := range []string{`"hello"`, `"world"`} {
		want := EmbeddingVector([]byte(in), DefaultEmbeddingDims)
		got := resp.Data[i].Embedding
		if resp.Data[i].Index != int64(i) || len(got) != len(want) {
			t.Fatalf("data[%d] = %+v", i, resp.Data[i])
		}
		var norm float64
		for j := range got {
			if float32(got[j]) != want[j] {
				t.Errorf("data[%d][%d] = %v, want %v", i, j, got[j], want[j])
			}
			norm += got[j] * got[j]
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("data[%d] has length² %v, want 1", i, norm)
		}
	}
	// dimensions and base64: the same numbers, packed as float32.
	r := e.mustPost(t, "/v1/embeddings", `{"model":"m","input":[1,2,3],"dimensions":3,"encoding_format":"base64"}`)
	var b struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &b) != nil || len(b.Data) != 1 || len(b.Data[0].Embedding) != 16 || b.Usage.PromptTokens != 3 {
		t.Fatalf("base64 answer %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{"model":"m"}`, `{"model":"m","input":""}`, `{"model":"m","input":[]}`, `{"model":"m","input":"x","dimensions":0}`, `{"model":"m","input":"x","encoding_format":"int8"}`, `{"model":"m","input":[{}]}`} {
		r := e.mustPost(t, "/v1/embeddings", bad)
		var eb struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if r.status != http.StatusBadRequest || json.Unmarshal([]byte(r.body), &eb) != nil || eb.Error.Message == "" {
			t.Errorf("%s: %d %s, want a 400 OpenAI error", bad, r.status, r.body)
		}
	}
	if st := e.stats(t); st.Models["text-embedding-3-small"].Completed != 1 {
		t.Errorf("stats %+v", st.Models)
	}
}
