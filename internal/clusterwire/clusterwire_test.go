package clusterwire

import (
	"bytes"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/messages"
)

// TestWrapUnwrap: a message comes back as it went; another carrier, a nil
// one and an invalid message are refused with ErrClusterMessage.
func TestWrapUnwrap(t *testing.T) {
	in := &messages.SharedCooldown{Target: "openai/main/gpt-4o", Until: 1700000000000, Reason: "rate_limit", From: "c@a"}
	v, err := Wrap(in)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Unwrap(v); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("Unwrap(Wrap(m)) = %#v, %v", out, err)
	}
	for _, bad := range []any{&wrapperspb.StringValue{Value: "x"}, (*wrapperspb.BytesValue)(nil), nil, &wrapperspb.BytesValue{}} {
		if m, err := Unwrap(bad); m != nil || !errors.Is(err, messages.ErrClusterMessage) {
			t.Errorf("Unwrap(%#v) = %v, %v", bad, m, err)
		}
	}
	if _, err := Wrap(&messages.SharedCooldown{Target: "t"}); !errors.Is(err, messages.ErrClusterMessage) {
		t.Errorf("Wrap of a cooldown naming no sender: %v", err)
	}
}

// TestUnwrapAs: the kind the receiver takes comes back typed; another
// valid kind is refused with ErrClusterMessage naming it and the receiver,
// and what Unwrap refuses UnwrapAs refuses too.
func TestUnwrapAs(t *testing.T) {
	in := &messages.SharedCooldown{Target: "t", Until: 5, From: "f"}
	v, err := Wrap(in)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := UnwrapAs[*messages.SharedCooldown](v, "the test"); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("UnwrapAs of its own kind = %#v, %v", out, err)
	}
	out, err := UnwrapAs[*messages.CreditReply](v, "the test")
	if out != nil || !errors.Is(err, messages.ErrClusterMessage) || !strings.Contains(err.Error(), "a shared_cooldown sent to the test") {
		t.Fatalf("UnwrapAs of another kind = %#v, %v", out, err)
	}
	if out, err := UnwrapAs[*messages.SharedCooldown](&wrapperspb.BytesValue{Value: []byte("{}")}, "the test"); out != nil || !errors.Is(err, messages.ErrClusterMessage) {
		t.Fatalf("UnwrapAs of bytes of no envelope = %#v, %v", out, err)
	}
}

// TestRefusalsCountAllLogOnceRedacted: every refusal is counted, the first
// alone is logged, and the line goes through the redaction path.
func TestRefusalsCountAllLogOnceRedacted(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var r Refusals
	secret := "sk-abcdefghijklmnopqrstuvwxyz"
	for range 3 {
		r.Note(log, "test receiver", errors.New("a peer said Bearer "+secret))
	}
	if r.Count() != 3 {
		t.Fatalf("counted %d, want 3", r.Count())
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", n, buf.String())
	}
	if strings.Contains(buf.String(), secret) || !strings.Contains(buf.String(), "test receiver") {
		t.Fatalf("the log line is not redacted or names no receiver: %s", buf.String())
	}
	r.Note(nil, "no logger", errors.New("x")) // counted, never a nil dereference
	if r.Count() != 4 {
		t.Fatalf("counted %d, want 4", r.Count())
	}
}
