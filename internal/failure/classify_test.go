package failure

import (
	"testing"

	"github.com/omniroute/gateway/messages"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   messages.FailureClass
	}{
		{200, "", messages.OK},
		{429, `{"error":{"type":"rate_limit_exceeded","code":"rate_limit_exceeded"}}`, messages.RateLimit},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, messages.Quota},
		{402, `{"error":{"code":402,"message":"Insufficient credits"}}`, messages.Quota},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`, messages.Quota},
		{400, `{"error":{"message":"Unsupported parameter"}}`, messages.Request},
		{404, `{"error":{"code":"model_not_found"}}`, messages.Request},
		{413, ``, messages.Request},
		{401, ``, messages.Auth},
		{403, ``, messages.Auth},
		{408, ``, messages.Timeout},
		{504, ``, messages.Timeout},
		{500, ``, messages.Capacity},
		{503, ``, messages.Capacity},
		{529, `{"type":"error","error":{"type":"overloaded_error"}}`, messages.Capacity},
	}
	for _, tc := range cases {
		got := Classify(tc.status, []byte(tc.body))
		if got != tc.want {
			t.Fatalf("Classify(%d, %s) = %v, want %v", tc.status, tc.body, got, tc.want)
		}
		if got == messages.Request && got.ProviderSide() {
			t.Fatal("request-caused class marked provider-side")
		}
	}
}

func TestClassifyEvent(t *testing.T) {
	f := func(data string, want messages.FailureClass) {
		t.Helper()
		if g := ClassifyEvent([]byte(data)); g != want {
			t.Fatalf("ClassifyEvent(%s) = %v, want %v", data, g, want)
		}
	}
	f(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, messages.Capacity)
	f(`{"error":{"type":"rate_limit_error"}}`, messages.RateLimit)
	f(`{"error":{"code":"insufficient_quota"}}`, messages.Quota)
	f(`{"error":{"code":"context_length_exceeded"}}`, messages.Request)
}
