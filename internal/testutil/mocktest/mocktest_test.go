package mocktest

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestStartServesTheModelsBehaviour: the mock Start returns answers on
// its address with the behaviour set for the model, and counts it.
func TestStartServesTheModelsBehaviour(t *testing.T) {
	mock, addr := Start(t, mockprovider.Options{}, map[string]mockprovider.Behavior{"m": {Text: "from mocktest"}})
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), "from mocktest") {
		t.Fatalf("status %d, body %s, %v: want 200 with the model's text", resp.StatusCode, body, err)
	}
	if got := mock.Stats().Models["m"].Completed; got != 1 {
		t.Fatalf("the mock counted %d completed requests for m, want 1", got)
	}
}
