package dialect

import (
	"slices"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/sse"
)

// TestEveryRowComplete holds every row of the table to the members it must
// fill: the front end reads paths, headers, the stream grammar and the
// interrupt frame from the row alone, so a row missing one would make the
// gateway send a request without its version header, relay a stream it
// cannot end, or cut one off without a frame the SDK reports.
func TestEveryRowComplete(t *testing.T) {
	routes := map[string]ID{}
	for _, id := range All {
		d := Of(id)
		for _, r := range []string{d.Route, d.CountTokensRoute} {
			if r == "" {
				continue
			}
			if prev, ok := routes[r]; ok {
				t.Errorf("%s: route %q is %s's too", d.Name, r, prev)
			}
			routes[r] = id
		}
		if d.Name == "" || d.Path == "" || d.Route == "" || d.Auth == "" || d.BetaHeader == "" || d.RequestIDHeader == "" {
			t.Errorf("%s: name, path, route, auth, beta header or request-id header empty: %+v", d.Name, d)
		}
		if !slices.Contains(AuthStyles[:], d.Auth) || AuthHeader(d.Auth) == "" {
			t.Errorf("%s: default auth %q is no auth style with a header", d.Name, d.Auth)
		}
		if (d.CountTokensPath == "") != (d.CountTokensRoute == "") {
			t.Errorf("%s: count-tokens path %q and route %q: both or neither", d.Name, d.CountTokensPath, d.CountTokensRoute)
		}
		if d.CountTokensRoute != "" {
			if d.CountTokensRoute != "/v1"+d.CountTokensPath {
				t.Errorf("%s: count-tokens route %q is not /v1%s", d.Name, d.CountTokensRoute, d.CountTokensPath)
			}
		}
		if (d.VersionHeader == "") != (d.Version == "") {
			t.Errorf("%s: version header %q and version %q: both or neither", d.Name, d.VersionHeader, d.Version)
		}
		if d.Family == Anthropic && d.VersionHeader == "" {
			t.Errorf("%s: Anthropic's API refuses a request without its version header", d.Name)
		}
		for _, h := range []string{d.VersionHeader, d.BetaHeader, d.RequestIDHeader} {
			if h != "" && !slices.Contains(CallerHeaders, h) && h != d.RequestIDHeader {
				t.Errorf("%s: header %q is not passed on (CallerHeaders)", d.Name, h)
			}
		}
		if !d.Streams {
			if d.DoneSentinel || d.NamedEvents || len(d.Terminal)+len(d.ErrorEvents)+len(d.Startup)+len(d.UsageEvents) > 0 || d.IDEvent != "" {
				t.Errorf("%s: a stream grammar on a dialect that does not stream", d.Name)
			}
			continue
		}
		// A streaming dialect: a way to end, an in-band error the relay
		// recognises and writes (AppendInterrupt), and usage events.
		if !d.DoneSentinel && len(d.Terminal) == 0 {
			t.Errorf("%s: a stream has no way to end", d.Name)
		}
		if d.NamedEvents != (len(d.ErrorEvents) > 0) || d.NamedEvents != (len(d.UsageEvents) > 0) || d.NamedEvents != (len(d.Startup) > 0) {
			t.Errorf("%s: named events and the error, usage and startup event lists go together", d.Name)
		}
		if d.IDEvent != "" && !slices.Contains(d.Startup, d.IDEvent) {
			t.Errorf("%s: id event %q is not a startup event: the relay must see it before the commit", d.Name, d.IDEvent)
		}
		frame := string(d.AppendInterrupt(nil, errInterrupted(), "rid", StreamPosition{Seq: 3, ResponseID: []byte("resp_1")}))
		var rd sse.Reader
		rd.Reset(strings.NewReader(frame))
		ev, err := rd.Next()
		if err != nil || !d.IsError(ev) {
			t.Errorf("%s: its interrupt frame %q does not open with an error event the grammar recognises (%v)", d.Name, frame, err)
		}
	}
	for _, h := range CallerHeaders {
		if !strings.Contains(h, "-") || h != strings.Join(canonicalParts(h), "-") {
			t.Errorf("caller header %q is not in canonical form", h)
		}
	}
}

func canonicalParts(h string) []string {
	parts := strings.Split(h, "-")
	for i, p := range parts {
		parts[i] = strings.ToUpper(p[:1]) + strings.ToLower(p[1:])
	}
	return parts
}

// TestForwardsTranslated: the rule that replaced transport's per-header
// switch: Anthropic's headers only to a Messages provider, OpenAI-Beta
// never across dialects, the others always.
func TestForwardsTranslated(t *testing.T) {
	for _, c := range []struct {
		name string
		up   ID
		want bool
	}{
		{"Anthropic-Version", Messages, true}, {"Anthropic-Beta", Messages, true},
		{"Anthropic-Version", Chat, false}, {"Anthropic-Beta", Responses, false},
		{"Openai-Beta", Chat, false}, {"Openai-Beta", Responses, false}, {"Openai-Beta", Messages, false},
		{"User-Agent", Messages, true}, {"Idempotency-Key", Chat, true},
	} {
		if got := ForwardsTranslated(c.name, c.up); got != c.want {
			t.Errorf("ForwardsTranslated(%s, %s) = %v, want %v", c.name, c.up, got, c.want)
		}
	}
	if !slices.Equal(CallerHeaders, []string{"Openai-Beta", "Anthropic-Version", "Anthropic-Beta"}) {
		t.Errorf("CallerHeaders = %q", CallerHeaders)
	}
	for style, h := range map[string]string{AuthBearer: "Authorization", AuthXAPIKey: "X-Api-Key", AuthGoogAPIKey: "X-Goog-Api-Key", AuthNone: "", "basic": ""} {
		if got := AuthHeader(style); got != h {
			t.Errorf("AuthHeader(%q) = %q, want %q", style, got, h)
		}
	}
}

// TestUsageReports are the cases of the parser the meter used before the
// table's became the only one (internal/ledger's), read through the table:
// a quoted "usage" is never taken for the report, a cumulative Anthropic
// stream replaces its counts, a null or malformed report is none.
func TestUsageReports(t *testing.T) {
	cases := []struct {
		name   string
		d      ID
		events [][2]string // name, data; a "" name reads data as a body
		want   Usage
		ok     bool
	}{
		{"chat completion", Chat, [][2]string{{"", `{"id":"x","choices":[{"message":{"content":"the \"usage\":{\"prompt_tokens\":99} is quoted"}}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":3}}}`}},
			Usage{Input: 12, Output: 5, Cached: 3, Seen: true}, true},
		{"chat usage chunk", Chat, [][2]string{{"message", `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`}},
			Usage{Input: 7, Output: 3, Seen: true}, true},
		{"details before the counts, a nested cached_tokens elsewhere ignored", Chat, [][2]string{{"", `{"usage":{"prompt_tokens_details":{"audio_tokens":0,"x":{"cached_tokens":9},"cached_tokens":1024},"completion_tokens_details":{"cached_tokens":7},"prompt_tokens":2000,"completion_tokens":10}}`}},
			Usage{Input: 2000, Output: 10, Cached: 1024, Seen: true}, true},
		{"usage null", Chat, [][2]string{{"message", `{"choices":[{"delta":{"content":"hi"}}],"usage":null}`}}, Usage{}, false},
		{"anthropic stream is cumulative", Messages, [][2]string{
			{"message_start", `{"type":"message_start","message":{"id":"m","usage":{"input_tokens":25,"cache_read_input_tokens":100,"cache_creation_input_tokens":0,"output_tokens":1}}}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}`}},
			Usage{Input: 125, Cached: 100, Output: 40, Seen: true}, true},
		// The documented pricing rule prices reasoning apart
		// (docs/tenants.md), so the report's reasoning_tokens are read.
		{"responses completed", Responses, [][2]string{{"response.completed", `{"type":"response.completed","sequence_number":9,"response":{"id":"r","output":[{"content":[{"text":"usage"}]}],"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":6},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":38}}}`}},
			Usage{Input: 30, Output: 8, Cached: 6, Reasoning: 2, Seen: true}, true},
		{"no usage", Chat, [][2]string{{"", `{"choices":[]}`}}, Usage{}, false},
		{"garbage", Chat, [][2]string{{"", `{"usage":{"prompt_tokens":"12","completion_tokens":-1`}}, Usage{}, false},
		{"negative counts are none", Chat, [][2]string{{"", `{"usage":{"prompt_tokens":-5,"completion_tokens":-1}}`}}, Usage{}, false},
		{"a malformed report leaves the earlier one", Messages, [][2]string{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}`},
			{"message_delta", `{"type":"message_delta","usage":{"output_tokens":15,"input_tokens":{]}}`}},
			Usage{Input: 25, Output: 1, Seen: true}, true},
	}
	for _, c := range cases {
		var u Usage
		ok := false
		for _, e := range c.events {
			if e[0] == "" {
				ok = Of(c.d).BodyUsage([]byte(e[1]), &u) || ok
				continue
			}
			ev := &sse.Event{Name: []byte(e[0]), Data: []byte(e[1])}
			if c.d == Chat {
				ev.Name = nil
			}
			ok = Of(c.d).EventUsage(ev, &u) || ok
		}
		if ok != c.ok || u != c.want {
			t.Errorf("%s: got %+v %v, want %+v %v", c.name, u, ok, c.want, c.ok)
		}
	}
	if u := (Usage{Input: 125, Cached: 100, CacheWrite: 5, Output: 40}); u.Tokens() != 165 {
		t.Fatalf("tokens %d: the cache counts are parts of Input, counted once", u.Tokens())
	}
}

// FuzzParseUsage: whatever a provider sends, the report has no negative
// count, its parts never exceed their wholes, and found agrees with Seen.
func FuzzParseUsage(f *testing.F) {
	f.Add(`{"prompt_tokens":1,"completion_tokens":2}`, uint8(0))
	f.Add(`{"output_tokens":15}`, uint8(1))
	f.Add(`{"input_tokens":5,"cache_read_input_tokens":999999999999999,"cache_creation_input_tokens":999999999999999}`, uint8(1))
	f.Add(`{"input_tokens":30,"input_tokens_details":{"cached_tokens":6},"output_tokens_details":{"reasoning_tokens":2}}`, uint8(2))
	f.Fuzz(func(t *testing.T, obj string, which uint8) {
		d := Of(All[int(which)%len(All)])
		var u Usage
		ok := d.ParseUsage([]byte(obj), &u)
		again := u
		ok2 := d.ParseUsage([]byte(obj), &again)
		if u.Input < 0 || u.Output < 0 || u.Cached < 0 || u.CacheWrite < 0 || u.Reasoning < 0 || ok != u.Seen || ok2 != ok {
			t.Fatalf("%s %q → %+v %v", d.Name, obj, u, ok)
		}
		if d.Family == Anthropic && u.Cached+u.CacheWrite > u.Input {
			t.Fatalf("%s %q: cache parts exceed the prompt: %+v", d.Name, obj, u)
		}
	})
}

func errInterrupted() *apierror.Error {
	return apierror.New(apierror.CodeStreamInterrupted, "the upstream provider ended the stream before completing it")
}
