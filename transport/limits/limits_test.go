package limits

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/catalog/catalogtest"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// fakeTenants is the tenant layer as the stage sees it, over one real
// tenant's counters (tenantlimit.State): what it was asked to reserve,
// settle and log.
type fakeTenants struct {
	lim     tenantlimit.Limits
	st      tenantlimit.State
	logging bool
	asked   tenantlimit.Request
	settled []tenantlimit.Usage
	logged  []store.Record
	refused []string // id/name/code
}

func (f *fakeTenants) Keys() *ikeys.Snapshot { return nil }
func (f *fakeTenants) Shares() *ikeys.Shares { return nil }
func (f *fakeTenants) Reserve(_ tenant.ID, req *tenantlimit.Request, now time.Time) (tenantlimit.Reservation, tenantlimit.Result) {
	f.asked = *req
	return f.st.Reserve(now, &f.lim, req)
}
func (f *fakeTenants) Settle(res *tenantlimit.Reservation, u tenantlimit.Usage, now time.Time) {
	f.settled = append(f.settled, u)
	res.Settle(now, u)
}
func (f *fakeTenants) Logging() bool { return f.logging }
func (f *fakeTenants) Log(r *store.Record, _, _ []byte) {
	f.logged = append(f.logged, *r)
}
func (f *fakeTenants) Refused(id []byte, name, code string) {
	f.refused = append(f.refused, string(id)+"/"+name+"/"+code)
}

// testCatalog has model "m" on two targets of different prices, and
// model "n" on one cheap target.
func testCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	return catalogtest.Build(t, `{
		"providers": {"p": {"base_url": "http://127.0.0.1:1/v1", "apis": ["chat"], "connections": {"k": {"api_key_env": "K"}}}},
		"models": {
			"m": {"targets": [{"connection": "p", "model": "cheap"}, {"connection": "p", "model": "dear"}]},
			"n": {"targets": [{"connection": "p", "model": "cheap"}]}
		}
	}`)
}

func testPrices(cat *catalog.Catalog) Prices {
	tab := pricing.New(pricing.Defaults{}, map[string]pricing.Price{
		"cheap": {Input: 1, Output: 2},
		"dear":  {Input: 10, Output: 20},
	})
	return BuildPrices(tab, cat, len(cat.Targets))
}

func limitedStage(t *testing.T, p tenantpolicy.Policy, logging bool) (*Stage, *fakeTenants, *ikeys.Entry) {
	t.Helper()
	f := &fakeTenants{logging: logging}
	e := &ikeys.Entry{Name: "acme", Policy: &p}
	f.lim = tenantlimit.LimitsOf(e.Policy)
	s := &Stage{}
	s.Attach(f, clock.NewFake(time.Unix(1_700_000_000, 0)))
	return s, f, e
}

// TestReservePricesAtTheDearestTarget: the reservation's cost is the
// estimate priced at the dearest target of the model and its fallbacks,
// and a request the limits let through is metered and settled once.
func TestReservePricesAtTheDearestTarget(t *testing.T) {
	cat := testCatalog(t)
	prices := testPrices(cat)
	s, f, e := limitedStage(t, tenantpolicy.Policy{RequestsPerMinute: 10, DailyBudgetUSD: 100}, false)
	st := State{Entry: e}
	a := Ask{Pricing: Pricing{Prices: prices, Model: cat.Model([]byte("n")), Surface: catalog.Chat},
		Fallbacks: []*catalog.Model{cat.Model([]byte("m"))}, Body: []byte(`{"model":"n"}`), MaxTokens: 1000, N: 1,
		DefaultOut: 512, Name: []byte("n"), Format: apierror.OpenAI}
	if _, ok := st.Reserve(s, &a); !ok {
		t.Fatal("refused")
	}
	dear, _ := prices.Of(cat.Model([]byte("m")).Targets[1].ID)
	if want := dear.Cost(pricing.Usage{Input: st.est - 1000, Output: 1000}); f.asked.Cost != want || want == 0 {
		t.Fatalf("reserved cost %d, want the dear target's %d", f.asked.Cost, want)
	}
	if !st.Meter || !st.Reserved() {
		t.Fatalf("a limited tenant's request: meter %v, reserved %v", st.Meter, st.Reserved())
	}
	o := Outcome{Pricing: a.Pricing, Tenant: &e.TenantID}
	st.Finish(s, &o)
	if st.Reserved() || len(f.settled) != 1 || !f.settled[0].Refund {
		t.Fatalf("a request that reached no provider is refunded once: %+v", f.settled)
	}
	if len(f.logged) != 0 {
		t.Fatal("logged with the request log off")
	}
}

// TestRefusalIsAnsweredWithTheLimitsHeaders: a tenant out of requests is
// refused in the caller's dialect with the rate-limit headers, which
// replace a provider's own, but for its retry hint.
func TestRefusalIsAnsweredWithTheLimitsHeaders(t *testing.T) {
	s, _, e := limitedStage(t, tenantpolicy.Policy{RequestsPerMinute: 1}, false)
	st := State{Entry: e}
	if r := st.Charge(s, nil, apierror.OpenAI); r != nil {
		t.Fatalf("the first request: %v", r.Message)
	}
	st = State{Entry: e}
	r := st.ChargeRefusal(s, apierror.New(apierror.CodeInvalidField, "bad"), apierror.OpenAI)
	if r.Status != 429 {
		t.Fatalf("a refusal once the rate is spent: %d %s, want the rate limit's 429", r.Status, r.Code)
	}
	var h fasthttp.ResponseHeader
	h.Set("X-Ratelimit-Limit-Requests", "999")
	h.Set("X-Ratelimit-Remaining-Tokens", "5")
	h.Set(tenantlimit.RetryAfterMsHeader, "7")
	st.ApplyHeaders(&h, true)
	if got := string(h.Peek("x-ratelimit-limit-requests")); got != "1" {
		t.Fatalf("x-ratelimit-limit-requests %q, want the tenant's 1", got)
	}
	if got := h.Peek("x-ratelimit-remaining-tokens"); got != nil {
		t.Fatalf("the provider's token header stayed: %q", got)
	}
	if got := string(h.Peek(tenantlimit.RetryAfterMsHeader)); got == "" {
		t.Fatal("the retry hint was removed")
	}
	var own fasthttp.ResponseHeader
	own.Set("X-Ratelimit-Remaining-Tokens", "5")
	st.ApplyHeaders(&own, false) // not a provider's answer: nothing of its own to remove
	if got := string(own.Peek("x-ratelimit-remaining-tokens")); got != "5" {
		t.Fatalf("a header of the gateway's own answer was removed: %q", got)
	}
}

// TestFinishCountsRefusalsAndLogsRequests: a request refused before its
// limits passed is counted under its tenant, one that passed is one
// record with the tenant's error code.
func TestFinishCountsRefusalsAndLogsRequests(t *testing.T) {
	cat := testCatalog(t)
	s, f, e := limitedStage(t, tenantpolicy.Policy{RequestsPerMinute: 10}, true)
	anon := tenant.Anonymous
	refused := State{}
	refused.NoteError(apierror.New(apierror.CodeInvalidField, "bad"))
	refused.Finish(s, &Outcome{Tenant: &anon, Status: 400})
	if len(f.refused) != 1 || f.refused[0] != "anonymous/anonymous/"+apierror.CodeInvalidField.String() {
		t.Fatalf("refusals %q", f.refused)
	}
	st := State{Entry: e}
	a := Ask{Pricing: Pricing{Prices: testPrices(cat), Model: cat.Model([]byte("n")), Surface: catalog.Chat},
		Body: []byte(`{}`), N: 1, DefaultOut: 10, Name: []byte("n")}
	if _, ok := st.Reserve(s, &a); !ok {
		t.Fatal("refused")
	}
	st.FirstToken(3 * time.Millisecond)
	tgt := a.Model.Targets[0]
	o := Outcome{Pricing: a.Pricing, Tenant: &e.TenantID, Attempts: 1, Target: tgt, Upstream: catalog.Chat,
		Metering: true, Usage: pricing.Usage{Input: 100, Output: 50, Seen: true}, Status: 200, Took: time.Second}
	st.Finish(s, &o)
	if len(f.logged) != 1 {
		t.Fatalf("%d records, want 1", len(f.logged))
	}
	r := f.logged[0]
	if r.TenantName != "acme" || r.Model != "n" || r.Target != tgt.Name || r.TokensIn != 100 || r.TokensOut != 50 ||
		r.TTFT != 3*time.Millisecond || r.Latency != time.Second || r.ErrorCode != "" || r.CostNano == 0 {
		t.Fatalf("record %+v", r)
	}
	if len(f.settled) != 1 || f.settled[0].Tokens != 150 || !f.settled[0].Known {
		t.Fatalf("settled %+v, want the usage report's 150 tokens", f.settled)
	}
}

// TestUnattachedStagePassesEverything: with no tenant layer (nothing
// attached) every request passes, unmetered, and nothing is settled.
func TestUnattachedStagePassesEverything(t *testing.T) {
	var s Stage
	st := State{}
	if _, ok := st.Reserve(&s, &Ask{}); !ok || st.Meter {
		t.Fatalf("passed %v, meter %v", ok, st.Meter)
	}
	if r := st.Charge(&s, []byte("x"), apierror.OpenAI); r != nil {
		t.Fatal("charged without a tenant layer")
	}
	if w := s.Weight(tenant.ID{}); w != tenantpolicy.DefaultWeight {
		t.Fatalf("weight %d", w)
	}
	st.Finish(&s, &Outcome{})
}

// TestPolicyRules: an allowed model must match one of the gateway's, a
// token window must fit a request without max_tokens, and the config
// file's tenants are held to both, each problem naming its field.
func TestPolicyRules(t *testing.T) {
	cat := testCatalog(t)
	if err := CheckModels(cat, "", []string{"m", "n*"}); err != nil {
		t.Fatal(err)
	}
	err := CheckModels(cat, "tenants[0].", []string{"m", "nope"})
	var fe tenantpolicy.FieldError
	if !errors.As(err, &fe) || fe.Path != "tenants[0].allowed_models[1]" {
		t.Fatalf("an unknown model: %v", err)
	}
	p := tenantpolicy.Policy{TokensPerMinute: 100}
	if err := CheckTokenWindows(&p, 4096, ""); err == nil {
		t.Fatal("a token window smaller than the default output reservation passed")
	}
	digest := func(i int, _ config.Tenant) ([32]byte, error) { return [32]byte{byte(i + 1)}, nil }
	ts := []config.Tenant{{Name: "a", Policy: tenantpolicy.Policy{AllowedModels: []string{"m"}}}}
	got, err := ConfigTenants(ts, digest, cat, 4096)
	if err != nil || len(got) != 1 || got[0].Name != "a" || got[0].KeySHA256 != [32]byte{1} {
		t.Fatalf("%+v %v", got, err)
	}
	ts = append(ts, config.Tenant{Name: "b", Policy: tenantpolicy.Policy{TokensPerMinute: 100}})
	if _, err := ConfigTenants(ts, digest, cat, 4096); err == nil || !strings.Contains(err.Error(), "tenants[1].") {
		t.Fatalf("the second tenant's window: %v", err)
	}
}

func TestPricesOf(t *testing.T) {
	cat := testCatalog(t)
	ps := testPrices(cat)
	if _, ok := ps.Of(len(ps)); ok {
		t.Fatal("an id past the prices has one")
	}
	p, ok := ps.Of(cat.Model([]byte("n")).Targets[0].ID)
	if !ok || p.Input != 1 {
		t.Fatalf("%+v %v", p, ok)
	}
}

// TestResolver: the config's tenants become the resolver identify runs
// against, each key from its key_env or key_sha256; a missing variable or
// a bad digest names the tenant's field and what to do.
func TestResolver(t *testing.T) {
	env := map[string]string{"KEY_A": "key-a"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	b := sha256.Sum256([]byte("key-b"))
	f := &config.File{Tenants: []config.Tenant{{Name: "a", KeyEnv: "KEY_A"}, {Name: "b", KeySHA256: hex.EncodeToString(b[:])}}}
	e := &config.Env{}
	e.Server.TenantSecret = "0123456789abcdef0123"
	res, err := Resolver(f, e, getenv)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"key-a", "key-b"} {
		if _, ten, d := res.Identify([]byte(k), false); d != tenant.Allowed || ten == nil || ten.Name != k[len(k)-1:] {
			t.Fatalf("%s: %v %+v", k, d, ten)
		}
	}
	if _, _, d := res.Identify([]byte("key-c"), false); d != tenant.InvalidKey {
		t.Fatalf("an unconfigured key in keys mode: %v", d)
	}
	if _, _, d := res.Identify(nil, false); d != tenant.MissingKey {
		t.Fatalf("no key in keys mode: %v", d)
	}
	delete(env, "KEY_A")
	if _, err := Resolver(f, e, getenv); err == nil || !strings.Contains(err.Error(), "tenants[0].key_env: environment variable KEY_A is not set") {
		t.Fatalf("a missing key_env: %v", err)
	}
	if _, err := KeyDigest(getenv, 3, config.Tenant{KeySHA256: "zz"}); err == nil || !strings.HasPrefix(err.Error(), "tenants[3].key_sha256: ") {
		t.Fatalf("a bad key_sha256: %v", err)
	}
}

// TestModelRefused: a key's allowed_models refuse another model with the
// tenant limits' model error; an anonymous caller or an open policy is
// refused nothing.
func TestModelRefused(t *testing.T) {
	var st State
	if st.ModelRefused([]byte("n")) != nil {
		t.Fatal("an anonymous caller was refused a model")
	}
	p := tenantpolicy.Policy{AllowedModels: []string{"m"}}
	st.Entry = &ikeys.Entry{Name: "acme", Policy: &p}
	if st.ModelRefused([]byte("m")) != nil {
		t.Fatal("an allowed model was refused")
	}
	want := tenantlimit.Result{Kind: tenantlimit.KindModel}
	if ae := st.ModelRefused([]byte("n")); ae == nil || ae.Code != want.APIError().Code {
		t.Fatalf("a model outside allowed_models: %+v", ae)
	}
	st.Entry = &ikeys.Entry{Name: "open", Policy: &tenantpolicy.Policy{}}
	if st.ModelRefused([]byte("n")) != nil {
		t.Fatal("a key without allowed_models was refused a model")
	}
}
