package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/sse"
)

// Fuzz targets, one per converter (the request, answer and stream reader
// of each dialect, each driving all three writers). The properties: no
// panic; a refusal is a typed error; every output is valid JSON that the
// target dialect's own reader accepts (for streams: SSE frames with JSON
// data in the caller's grammar that its decoder accepts).

// fuzzOn is a fuzz target for one dialect: seeded by seed, each input
// held to check's property.
func fuzzOn(f *testing.F, id dialect.ID, seed func(*testing.F, dialect.ID), check func(*testing.T, dialect.ID, []byte)) {
	seed(f, id)
	f.Fuzz(func(t *testing.T, b []byte) { check(t, id, b) })
}

func fuzzRequest(t *testing.T, from dialect.ID, body []byte) {
	for _, to := range dialect.Translated {
		tr := New(from, to, Options{Model: "m"})
		out, err := tr.Request(nil, body)
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || te.Field == "" || te.Code == 0 {
				t.Fatalf("%s→%s: untyped error %v", from, to, err)
			}
			continue
		}
		if !json.Valid(out) {
			t.Fatalf("%s→%s: invalid JSON %s", from, to, out)
		}
		// The output is a request of the target dialect: its own reader
		// takes it.
		again := New(to, to, Options{Model: "m"})
		if _, err := again.Request(nil, out); err != nil {
			t.Fatalf("%s→%s output refused by the %s reader: %v\n%s", from, to, to, err, out)
		}
	}
}

func seedRequests(f *testing.F, from dialect.ID) {
	for _, tc := range reqCases {
		if tc.from == from {
			f.Add([]byte(tc.body))
		}
	}
	for _, tc := range refusals {
		if tc.from == from {
			f.Add([]byte(tc.body))
		}
	}
	for _, b := range roundTrips[from] {
		f.Add([]byte(b))
	}
	f.Add([]byte(minimalRequest[from]))
}

func FuzzRequestChat(f *testing.F) { fuzzOn(f, dialect.Chat, seedRequests, fuzzRequest) }

func FuzzRequestMessages(f *testing.F) { fuzzOn(f, dialect.Messages, seedRequests, fuzzRequest) }

func FuzzRequestResponses(f *testing.F) { fuzzOn(f, dialect.Responses, seedRequests, fuzzRequest) }

func fuzzResponse(t *testing.T, upstream dialect.ID, body []byte) {
	for _, from := range dialect.Translated {
		tr := New(from, upstream, Options{Model: "m"})
		if _, err := tr.Request(nil, []byte(minimalRequest[from])); err != nil {
			t.Fatal(err)
		}
		out, err := tr.Response(nil, body)
		if err != nil {
			var ue *UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("untyped error %v", err)
			}
			continue
		}
		if !json.Valid(out) {
			t.Fatalf("%s←%s: invalid JSON %s", from, upstream, out)
		}
		// The caller's dialect reads it back as an answer of its own.
		if _, err := New(from, from, Options{}).Response(nil, out); err != nil {
			t.Fatalf("%s←%s: output is not a %s answer: %v\n%s", from, upstream, from, err, out)
		}
	}
}

func seedBodies(f *testing.F, upstream dialect.ID) {
	for _, fx := range bodyFixtures {
		if fx.upstream == upstream {
			f.Add([]byte(fx.body))
		}
	}
}

func FuzzResponseChat(f *testing.F) { fuzzOn(f, dialect.Chat, seedBodies, fuzzResponse) }

func FuzzResponseMessages(f *testing.F) { fuzzOn(f, dialect.Messages, seedBodies, fuzzResponse) }

func FuzzResponseResponses(f *testing.F) { fuzzOn(f, dialect.Responses, seedBodies, fuzzResponse) }

// fuzzStream relays stream (upstream dialect bytes) into each caller
// dialect and checks the caller's frames.
func fuzzStream(t *testing.T, upstream dialect.ID, stream []byte) {
	for _, from := range dialect.Translated {
		tr := New(from, upstream, Options{Model: "m", Created: 1})
		if _, err := tr.Request(nil, []byte(minimalRequest[from])); err != nil {
			t.Fatal(err)
		}
		rd := sse.NewReader(bytes.NewReader(stream), nil, 1<<20)
		var out []byte
		for !tr.Done() {
			ev, err := rd.Next()
			if err != nil {
				ok := false
				if err == io.EOF {
					out, ok = tr.End(out)
				}
				if !ok {
					out = tr.Interrupt(out, &apierror.Error{Status: 502, Code: "stream_interrupted", Message: "cut"}, "r")
				}
				break
			}
			if out, err = tr.Event(out, ev); err != nil {
				var ue *UpstreamError
				if !errors.As(err, &ue) {
					t.Fatalf("untyped error %v", err)
				}
				out = tr.Interrupt(out, ue.APIError(), "r")
			}
		}
		checkCallerStream(t, from, out)
	}
}

// checkCallerStream holds a caller-dialect stream to its grammar: every
// frame's data is JSON (or chat's [DONE], last), every frame of a
// named-event dialect names its event and the data's type agrees, and the
// dialect's own decoder reads it without error.
func checkCallerStream(t *testing.T, from dialect.ID, out []byte) {
	t.Helper()
	d := dialect.Of(from)
	rd := sse.NewReader(bytes.NewReader(out), nil, 0)
	back := New(dialect.Chat, from, Options{})
	var w []byte
	done := false
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s stream does not parse as SSE: %v\n%s", from, err, out)
		}
		if done {
			t.Fatalf("%s: frames after [DONE]:\n%s", from, out)
		}
		if d.DoneSentinel && string(ev.Data) == "[DONE]" {
			done = true
			continue
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("%s: frame data is not JSON: %q", from, ev.Data)
		}
		if d.NamedEvents {
			var typ struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(ev.Data, &typ)
			if len(ev.Name) == 0 || typ.Type != string(ev.Name) {
				t.Fatalf("%s: frame event %q with data type %q", from, ev.Name, typ.Type)
			}
		}
		if w, err = back.Event(w[:0], ev); err != nil {
			t.Fatalf("%s: own decoder refused %q: %v", from, ev.Data, err)
		}
	}
	if !back.Done() && len(out) > 0 {
		if _, ok := back.End(nil); !ok && !bytes.Contains(out, []byte("error")) {
			t.Fatalf("%s stream neither completes nor reports an error:\n%s", from, out)
		}
	}
}

func seedStreams(f *testing.F, upstream dialect.ID) {
	for _, fx := range streamFixtures {
		if fx.upstream == upstream {
			f.Add([]byte(fx.stream))
			f.Add([]byte(fx.stream[:len(fx.stream)/2]))
		}
	}
	f.Add([]byte(strings.Repeat("data: {}\n\n", 3)))
}

func FuzzStreamChat(f *testing.F) { fuzzOn(f, dialect.Chat, seedStreams, fuzzStream) }

func FuzzStreamMessages(f *testing.F) { fuzzOn(f, dialect.Messages, seedStreams, fuzzStream) }

func FuzzStreamResponses(f *testing.F) { fuzzOn(f, dialect.Responses, seedStreams, fuzzStream) }
