package edge

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestCredential: the bearer token first, then x-api-key, then
// x-goog-api-key, each trimmed; an empty bearer token falls through.
func TestCredential(t *testing.T) {
	for _, c := range []struct {
		headers []string
		want    string
	}{
		{nil, ""},
		{[]string{"Authorization", "Bearer  k1 ", "x-api-key", "k2"}, "k1"},
		{[]string{"Authorization", "bEaReR k1"}, "k1"},
		{[]string{"Authorization", "Bearer   ", "x-api-key", " k2"}, "k2"},
		{[]string{"Authorization", "Basic abc", "x-goog-api-key", "k3 "}, "k3"},
		{[]string{"x-api-key", "k2", "x-goog-api-key", "k3"}, "k2"},
		{[]string{"x-api-key", "  ", "x-goog-api-key", "k3"}, "k3"},
	} {
		var h fasthttp.RequestHeader
		for i := 0; i < len(c.headers); i += 2 {
			h.Set(c.headers[i], c.headers[i+1])
		}
		if got := string(Credential(&h)); got != c.want {
			t.Errorf("%q: %q, want %q", c.headers, got, c.want)
		}
	}
}
