package ledger

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestEstimate(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`) // 60 bytes
	in, out := Estimate(body, -1, 0, DefaultOutputTokens)
	if in != 15 || out != 1024 {
		t.Fatalf("in %d out %d", in, out)
	}
	if _, out := Estimate(body, 200, 1, DefaultOutputTokens); out != 200 {
		t.Fatalf("max_tokens ignored: %d", out)
	}
	if _, out := Estimate(body, 0, 1, 512); out != 512 {
		t.Fatalf("zero max_tokens must fall back to the default: %d", out)
	}
	// n answers may each use max_tokens.
	for _, c := range []struct{ max, n, want int64 }{{200, 128, 25600}, {0, 3, 3 * 1024}, {200, -1, 200}} {
		if _, out := Estimate(body, c.max, c.n, DefaultOutputTokens); out != c.want {
			t.Fatalf("max_tokens %d, n %d: output %d, want %d", c.max, c.n, out, c.want)
		}
	}
	img := `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 400000) + `"}}]}]}`
	in, _ = Estimate([]byte(img), 10, 1, 1)
	if in < ImageTokens || in > ImageTokens+100 {
		t.Fatalf("an inline image must cost about %d tokens, not its bytes: %d", ImageTokens, in)
	}
}

// FuzzEstimate: any body gives an estimate, never a negative one.
func FuzzEstimate(f *testing.F) {
	f.Add(`{"usage":{"prompt_tokens":1,"completion_tokens":2}}`)
	f.Add(`{"messages":[{"content":"data:image/png;base64,AAAA"}]}`)
	f.Fuzz(func(t *testing.T, data string) {
		if in, out := Estimate([]byte(data), -1, 1, 1); in < 0 || out < 0 {
			t.Fatalf("%q → %d %d", data, in, out)
		}
	})
}
