package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// validClusterMessages holds, for every kind, messages that exercise its
// fields: zero-ish ones, extremes, and lists. Empty lists are nil (the
// codec decodes an empty list as nil).
func validClusterMessages() map[ClusterKind][]ClusterMessage {
	long := strings.Repeat("x", MaxClusterString)
	backs := make([]CreditBack, MaxCreditBacks)
	for i := range backs {
		backs[i] = CreditBack{At: int64(i) << 40, N: -int64(i)}
	}
	return map[ClusterKind][]ClusterMessage{
		KindCreditRequest: {
			&CreditRequest{Op: CreditAcquire, Node: "n1", Window: 29000000, Amount: 640, Seq: 7},
			&CreditRequest{Op: CreditRelease, Node: "ü\x00x", Window: 1<<63 + 5, Amount: -3, Backs: []CreditBack{{At: 1 << 62, N: 5}, {At: -1, N: 0}}},
			&CreditRequest{Op: CreditRenew, Node: long, Amount: math.MaxInt64, Need: math.MinInt64, Backs: backs, Seq: math.MaxUint64},
		},
		KindCreditReply: {
			&CreditReply{},
			&CreditReply{Granted: 5, Left: 9, Recovering: true},
			&CreditReply{Granted: -1, Unavailable: true, Contended: true, Refused: true, Period: 255},
			&CreditReply{Granted: 3, Left: math.MaxInt64, At: math.MinInt64, WaitMs: 1, ResetMs: 60000, Limit: 100, Period: 2, Contended: true},
		},
		KindSharedQuotaPoll: {
			&SharedQuotaPoll{Conn: "openrouter/main", From: "omniroute@a"},
			&SharedQuotaPoll{Conn: "c", From: "f", At: 1700000000123456789, Err: "GET /api/v1/key answered 500", Values: []SharedQuotaValue{
				{Dimension: DimCredits, Flags: HasLimit | HasRemaining, Limit: 100.5, Used: 0.25, Remaining: math.Copysign(0, -1), Unit: "usd", Confidence: 2},
				{Dimension: NumQuotaDimensions - 1, Model: "m", Flags: 255, Limit: math.MaxFloat64, Used: -math.SmallestNonzeroFloat64, ResetAt: -1, Expires: math.MaxInt64},
			}},
		},
		KindSharedQuotaHeaders: {
			&SharedQuotaHeaders{Conn: "c", From: "f"},
			&SharedQuotaHeaders{Conn: "openai/main", From: "omniroute@b", Observations: []SharedQuotaObservation{
				{Model: "gpt-4o", At: 1, Readings: []SharedQuotaReading{{Dimension: DimRequests, Flags: HasLimit | HasRemaining | HasReset, Limit: 500, Remaining: 499, ResetAt: 1700000060000000000, Window: 60e9}}},
				{Model: "", At: -5},
				{Model: "full", At: 7, Readings: make([]SharedQuotaReading, MaxQuotaReadings)},
			}},
		},
		KindSharedCooldown: {
			&SharedCooldown{Target: "openai/main/gpt-4o", Until: 1700000000123, Reason: "rate_limit", From: "omniroute@a"},
			&SharedCooldown{Target: "t", Until: -1, From: "f"},
		},
	}
}

// TestClusterCodecRoundTrip: every kind's messages decode to what was
// encoded, and the table covers every kind.
func TestClusterCodecRoundTrip(t *testing.T) {
	table := validClusterMessages()
	for _, k := range ClusterKinds() {
		ms := table[k]
		if len(ms) == 0 {
			t.Errorf("kind %s has no round-trip case", k)
		}
		for i, m := range ms {
			if m.ClusterKind() != k {
				t.Fatalf("%s case %d is a %s", k, i, m.ClusterKind())
			}
			b, err := EncodeCluster(m)
			if err != nil {
				t.Fatalf("%s case %d: encode: %v", k, i, err)
			}
			got, err := DecodeCluster(b)
			if err != nil {
				t.Fatalf("%s case %d: decode: %v", k, i, err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("%s case %d: decoded\n%#v\nwant\n%#v", k, i, got, m)
			}
		}
	}
	if len(table) != len(ClusterKinds()) {
		t.Fatalf("the table has %d kinds, the codec %d", len(table), len(ClusterKinds()))
	}
}

// TestClusterCodecRefuses: invalid messages are not encoded, and malformed,
// foreign, old-format and oversized bytes are refused with an error that
// wraps ErrClusterMessage and says what was wrong.
func TestClusterCodecRefuses(t *testing.T) {
	for _, m := range []ClusterMessage{
		&CreditRequest{Node: "n"}, // no operation
		&CreditRequest{Op: 4, Node: "n"},
		&CreditRequest{Op: CreditAcquire},
		&CreditRequest{Op: CreditRelease, Node: "n", Backs: make([]CreditBack, MaxCreditBacks+1)},
		&CreditRequest{Op: CreditAcquire, Node: strings.Repeat("n", MaxClusterString+1)},
		&SharedQuotaPoll{Conn: "c"},
		&SharedQuotaPoll{Conn: "c", From: "f", Values: []SharedQuotaValue{{Dimension: NumQuotaDimensions}}},
		&SharedQuotaPoll{Conn: "c", From: "f", Values: []SharedQuotaValue{{Limit: math.NaN()}}},
		&SharedQuotaPoll{Conn: "c", From: "f", Values: make([]SharedQuotaValue, MaxSharedQuotaItems+1)},
		&SharedQuotaHeaders{From: "f"},
		&SharedQuotaHeaders{Conn: "c", From: "f", Observations: []SharedQuotaObservation{{Model: "m"}}}, // no time
		&SharedQuotaHeaders{Conn: "c", From: "f", Observations: []SharedQuotaObservation{{At: 1, Readings: make([]SharedQuotaReading, MaxQuotaReadings+1)}}},
		&SharedQuotaHeaders{Conn: "c", From: "f", Observations: []SharedQuotaObservation{{At: 1, Readings: []SharedQuotaReading{{Remaining: math.Inf(-1)}}}}},
		&SharedCooldown{From: "f"},
		&SharedCooldown{Target: "t"},
	} {
		if b, err := EncodeCluster(m); err == nil || !errors.Is(err, ErrClusterMessage) {
			t.Errorf("EncodeCluster(%#v) = %d bytes, %v; want an ErrClusterMessage", m, len(b), err)
		}
	}

	good, err := EncodeCluster(&SharedCooldown{Target: "t", Until: 5, Reason: "r", From: "f"})
	if err != nil {
		t.Fatal(err)
	}
	oldJSON, _ := json.Marshal(map[string]any{"target": "t", "until": 5, "reason": "r", "from": "f"})
	huge := make([]byte, MaxClusterMessageBytes+1)
	copy(huge, good)
	for _, c := range []struct {
		name string
		b    []byte
		says string
	}{
		{"empty", nil, "not an envelope"},
		{"the cooldowns' and quota's JSON of the release before", oldJSON, "not an envelope"},
		{"a credit grain call of the release before", []byte{1, 2, 'n', '1', 0, 2, 0, 0}, "not an envelope"},
		{"a credit grain reply of the release before", []byte{2, 0, 10, 2, 0, 0, 0, 0}, "not an envelope"},
		{"another version", append([]byte{wireMagic, wireVersion + 1}, good[2:]...), "wire version 3"},
		{"kind 0", []byte{wireMagic, wireVersion, 0}, "unknown kind 0"},
		{"an unknown kind", []byte{wireMagic, wireVersion, byte(numClusterKinds)}, "unknown kind"},
		{"cut short", good[:len(good)-1], "cut short"},
		{"a byte after the last field", append(bytes.Clone(good), 0), "after the last field"},
		{"a varint in a longer form", []byte{wireMagic, wireVersion, byte(KindSharedCooldown), 1, 't', 0x8a, 0x00, 0, 1, 'f'}, "shortest form"},
		{"a forged list length", []byte{wireMagic, wireVersion, byte(KindCreditRequest), 1, 1, 'n', 0, 0, 0, 40}, "cut short"},
		{"a list over its limit", []byte{wireMagic, wireVersion, byte(KindCreditRequest), 1, 1, 'n', 0, 0, 0, 0x80, 0x01}, "more than 64"},
		{"a string over its limit", append([]byte{wireMagic, wireVersion, byte(KindSharedCooldown), 0x81, 0x20}, make([]byte, 4097)...), "more than 4096"},
		{"unknown flags", []byte{wireMagic, wireVersion, byte(KindCreditReply), 0x10, 0, 0, 0, 0, 0, 0, 0}, "unknown flags"},
		{"an invalid value", []byte{wireMagic, wireVersion, byte(KindSharedCooldown), 0, 0, 0, 1, 'f'}, "no target"},
		{"over the size limit", huge, "more than 1048576"},
	} {
		m, err := DecodeCluster(c.b)
		if err == nil || !errors.Is(err, ErrClusterMessage) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: DecodeCluster = %#v, %v; want an ErrClusterMessage saying %q", c.name, m, err, c.says)
		}
		if m != nil {
			t.Errorf("%s: DecodeCluster returned a message with its error", c.name)
		}
	}
}

// FuzzClusterCodec: arbitrary bytes never panic the decoder; what it
// accepts is valid and encodes back to exactly the bytes it came from (so
// decode(encode(m)) == m for every message the wire can carry); and for
// valid messages built from the fuzzer's values decode(encode(m)) == m.
func FuzzClusterCodec(f *testing.F) {
	for _, ms := range validClusterMessages() {
		for _, m := range ms {
			b, err := EncodeCluster(m)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, "", int64(0), uint8(0))
		}
	}
	f.Add([]byte(`{"target":"t"}`), "node", int64(-7), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, s string, n int64, u uint8) {
		if m, err := DecodeCluster(b); err != nil {
			if m != nil || !errors.Is(err, ErrClusterMessage) {
				t.Fatalf("DecodeCluster returned %#v with %v", m, err)
			}
		} else {
			if err := m.Validate(); err != nil {
				t.Fatalf("DecodeCluster returned an invalid message: %v", err)
			}
			again, err := EncodeCluster(m)
			if err != nil {
				t.Fatalf("a decoded message does not encode: %v", err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("decode then encode changed the bytes:\n%x\n%x", b, again)
			}
		}
		x := float64(n) / 3
		for _, m := range []ClusterMessage{
			&CreditRequest{Op: CreditOp(u%3 + 1), Node: s + "n", Window: uint64(n), Amount: n, Need: -n, Backs: []CreditBack{{At: n, N: int64(u)}}},
			&CreditReply{Granted: n, Left: -n, At: n ^ 0x55, Period: u, Refused: u&1 != 0, Contended: u&2 != 0},
			&SharedQuotaPoll{Conn: s + "c", From: "f", At: n, Err: s, Values: []SharedQuotaValue{{Dimension: QuotaDimension(u % uint8(NumQuotaDimensions)), Model: s, Flags: u, Limit: x, Used: -x, Remaining: x * x, ResetAt: n, Unit: s, Confidence: u, Expires: -n}}},
			&SharedQuotaHeaders{Conn: "c", From: s + "f", Observations: []SharedQuotaObservation{{Model: s, At: n | 1, Readings: []SharedQuotaReading{{Dimension: QuotaDimension(u % uint8(NumQuotaDimensions)), Flags: u, Limit: x, Remaining: -x, ResetAt: n, Window: -n}}}}},
			&SharedCooldown{Target: s + "t", Until: n, Reason: s, From: s + "f"},
		} {
			enc, err := EncodeCluster(m)
			if len(s) >= MaxClusterString { // a string over the limit
				if err == nil {
					t.Fatalf("EncodeCluster took a string of %d bytes", len(s)+1)
				}
				continue
			}
			if err != nil {
				t.Fatalf("EncodeCluster(%#v): %v", m, err)
			}
			got, err := DecodeCluster(enc)
			if err != nil {
				t.Fatalf("DecodeCluster(EncodeCluster(%#v)): %v", m, err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip changed the message:\n%#v\n%#v", got, m)
			}
		}
	})
}
