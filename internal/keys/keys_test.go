package keys

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestGenerateSecret(t *testing.T) {
	a, err := GenerateSecret()
	b, _ := GenerateSecret()
	if err != nil || a == b || !strings.HasPrefix(a, SecretPrefix) || len(a) != len(SecretPrefix)+64 {
		t.Fatalf("%q %q %v", a, b, err)
	}
}

func TestDecodeCreate(t *testing.T) {
	name, p, err := DecodeCreate([]byte(`{"name":"ci-agents","requests_per_minute":60,"max_concurrent":4,"allowed_models":["claude-*"]}`))
	if err != nil || name != "ci-agents" || p.RequestsPerMinute != 60 || p.MaxConcurrent != 4 {
		t.Fatalf("%q %+v %v", name, p, err)
	}
	for body, field := range map[string]string{
		`{"name":"x","bogus":1}`:                  "bogus",
		`{"name":"x","max_concurrent":-1}`:        "max_concurrent",
		`{"name":"x","daily_budget_usd":-5}`:      "daily_budget_usd",
		`{"name":"x","allowed_models":["a b"]}`:   "allowed_models[0]",
		`{"name":"bad name"}`:                     "name",
		`{"requests_per_minute":1}`:               "name",
		`{"name":"x","tokens_per_minute":"lots"}`: "tokens_per_minute",
	} {
		_, _, err := DecodeCreate([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Field != field || e.Status != 400 || e.Code == "" {
			t.Errorf("%s: %v (field %q), want field %q", body, err, fieldOf(err), field)
		}
	}
	if _, err := DecodePolicy([]byte(`{"weight":2000}`)); fieldOf(err) != "weight" {
		t.Fatalf("policy body: %v", err)
	}
}

func fieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

func TestSnapshotLookup(t *testing.T) {
	r, _ := tenant.NewResolver([]byte("0123456789abcdef"), tenant.ModeKeys, false, nil)
	now := time.Now()
	mk := func(name, secret string, revoked bool, src Source) Key {
		d := Digest([]byte(secret))
		k := Key{Info: Info{Name: name, Source: src, Policy: tenantpolicy.Policy{RequestsPerMinute: 5}, KeySHA256Prefix: HashHex(d)[:8]}, Digest: d, ID: r.IDForDigest(d)}
		k.TenantID = k.ID.String()
		if revoked {
			k.RevokedAt = &now
		}
		return k
	}
	s := Build([]Key{mk("b", "sk-b", false, FromStore), mk("a", "sk-a", false, FromConfig), mk("gone", "sk-gone", true, FromStore)})
	e, ok := s.Lookup([]byte("sk-a"))
	if !ok || e.Name != "a" || e.Source != FromConfig || e.TenantID != r.IDForKey([]byte("sk-a")) || e.Policy.RequestsPerMinute != 5 {
		t.Fatalf("%+v %v", e, ok)
	}
	if _, ok := s.Lookup([]byte("sk-gone")); ok {
		t.Fatal("revoked key authenticates")
	}
	if _, ok := s.Lookup([]byte("sk-unknown")); ok {
		t.Fatal("unknown key authenticates")
	}
	// Retired secrets: a revoked key's, and a stored key's first secret
	// after a rotation (its digest is no longer stored, its id still is).
	rotated := mk("rot", "sk-first", false, FromStore)
	rotated.Digest = Digest([]byte("sk-second"))
	s2 := Build([]Key{rotated, mk("gone", "sk-gone", true, FromStore), mk("cfg", "sk-cfg", false, FromConfig)})
	for _, c := range []struct {
		secret string
		want   bool
	}{{"sk-gone", true}, {"sk-first", true}, {"sk-second", false}, {"sk-cfg", false}, {"sk-unknown", false}} {
		d := Digest([]byte(c.secret))
		if got := s2.Retired(d, r.IDForDigest(d)); got != c.want {
			t.Errorf("Retired(%s) = %v, want %v", c.secret, got, c.want)
		}
	}
	if _, ok := s2.Lookup([]byte("sk-second")); !ok {
		t.Fatal("the rotated key's new secret does not authenticate")
	}
	if infos := s.Infos(); len(infos) != 3 || infos[0].Name != "a" || infos[2].Name != "gone" {
		t.Fatalf("%+v", infos)
	}
	if i, ok := s.Info("gone"); !ok || i.RevokedAt == nil {
		t.Fatal("revoked key not listed")
	}
	if act := s.Active(); len(act) != 2 || act[0].Name != "a" {
		t.Fatalf("%+v", act)
	}
	key := []byte("sk-b")
	if a := testing.AllocsPerRun(100, func() { s.Lookup(key) }); a != 0 {
		t.Fatalf("Lookup allocated %.1f times", a)
	}
}

// TestSharesOf: the shares are the active keys' weights (only those
// other than the default) and policies; a revoked key has none, and a
// nil *Shares is the empty set.
func TestSharesOf(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	heavy, plain, gone := tenant.ID{1}, tenant.ID{2}, tenant.ID{3}
	s := Build([]Key{
		{Info: Info{Name: "heavy", Source: FromStore, Policy: tenantpolicy.Policy{Weight: 4, RequestsPerMinute: 7}}, Digest: [32]byte{1}, ID: heavy},
		{Info: Info{Name: "plain", Source: FromStore}, Digest: [32]byte{2}, ID: plain},
		{Info: Info{Name: "gone", Source: FromStore, Policy: tenantpolicy.Policy{Weight: 9}, RevokedAt: &at}, Digest: [32]byte{3}, ID: gone},
	})
	sh := SharesOf(s)
	if w := sh.Weight(heavy); w != 4 {
		t.Errorf("heavy's weight %d, want 4", w)
	}
	if w := sh.Weight(plain); w != tenantpolicy.DefaultWeight {
		t.Errorf("plain's weight %d, want the default", w)
	}
	if w := sh.Weight(gone); w != tenantpolicy.DefaultWeight {
		t.Errorf("a revoked key's weight %d, want the default", w)
	}
	if len(sh.Weights) != 1 {
		t.Errorf("weights %v: only the ones other than the default", sh.Weights)
	}
	if p, ok := sh.Policy(heavy.String()); !ok || p.RequestsPerMinute != 7 {
		t.Errorf("heavy's policy %+v %v", p, ok)
	}
	if _, ok := sh.Policy(plain.String()); !ok {
		t.Error("plain has no policy entry")
	}
	if _, ok := sh.Policy(gone.String()); ok {
		t.Error("a revoked key has a policy entry")
	}
	var none *Shares
	if none.Weight(heavy) != tenantpolicy.DefaultWeight {
		t.Error("a nil Shares gives a weight other than the default")
	}
	if _, ok := none.Policy(heavy.String()); ok {
		t.Error("a nil Shares has a policy")
	}
}
