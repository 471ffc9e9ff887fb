package admit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/admission"
)

// TestBriefHealthHidesTenants: what health shows a caller the
// management routes refuse has no tenant id (the admission lanes are
// per tenant); the cluster section's brief, without a member's address
// or id, is tested in transport/gateway/clusterlayer.
func TestBriefHealthHidesTenants(t *testing.T) {
	s := &lanes.Snapshot{Mode: "enforce", Upstreams: []lanes.Upstream{{Name: "mock/a/m", QueuedCount: 2,
		LaneTenants: []lanes.LaneTenant{{TenantKey: "key_0123456789abcdef", QueuedCount: 2}}}}}
	b, _ := json.Marshal(Brief(s))
	if strings.Contains(string(b), "key_0123456789abcdef") || strings.Contains(string(b), "laneTenants") || !strings.Contains(string(b), `"queuedCount":2`) {
		t.Fatalf("brief lanes: %s", b)
	}
}

// TestLaneErrorsComplete: every admission reason maps to an error with a
// status and (for a refusal) a code and a message; a reason without one
// was a nil lookup inside a fasthttp handler.
func TestLaneErrorsComplete(t *testing.T) {
	for r := lanes.Reason(0); r < lanes.NumReasons; r++ {
		e := refusals[r]
		if e == nil || e.Status == 0 {
			t.Fatalf("reason %d has no answer", r)
		}
		if r != lanes.None && (e.Code == "" || e.Message == "" || e.Status < 400) {
			t.Errorf("reason %d answer incomplete: %+v", r, e)
		}
	}
}

// TestPriority: the class is the tenant's fixed class, else the default;
// the header chooses either class except that a tenant fixed at batch
// cannot raise itself; a bad header value is refused; the class chosen
// is answered in X-OmniRoute-Priority. The stage runs here without the
// pipeline or the lanes actor.
func TestPriority(t *testing.T) {
	var s Stage
	s.Attach(nil, admission.Interactive)
	for _, tc := range []struct {
		name   string
		header string
		tenant admission.Class
		fixed  bool
		want   admission.Class
		bad    bool
	}{
		{name: "default", want: admission.Interactive},
		{name: "tenant's class", tenant: admission.Batch, fixed: true, want: admission.Batch},
		{name: "header lowers", header: "batch", want: admission.Batch},
		{name: "fixed batch cannot raise", header: "interactive", tenant: admission.Batch, fixed: true, want: admission.Batch},
		{name: "fixed interactive may lower", header: "batch", tenant: admission.Interactive, fixed: true, want: admission.Batch},
		{name: "bad value", header: "urgent", bad: true},
	} {
		var ctx fasthttp.RequestCtx
		if tc.header != "" {
			ctx.Request.Header.Set(PriorityHeader, tc.header)
		}
		var st State
		e := st.Priority(&s, &ctx, tc.tenant, tc.fixed)
		if tc.bad {
			if e == nil || e.Status != 400 {
				t.Errorf("%s: error %v, want a 400", tc.name, e)
			}
			continue
		}
		if e != nil || st.Class != tc.want || string(ctx.Response.Header.Peek("X-OmniRoute-Priority")) != tc.want.String() {
			t.Errorf("%s: class %v header %q error %v, want %v", tc.name, st.Class, ctx.Response.Header.Peek("X-OmniRoute-Priority"), e, tc.want)
		}
	}
}

// TestRefusalRetry: a measured Retry-After replaces the reason's own on a
// copy; the table's answer is never changed.
func TestRefusalRetry(t *testing.T) {
	r := lanes.Unavailable
	base := Refusal(r, 0)
	got := Refusal(r, base.RetryAfter+7)
	if got.RetryAfter != base.RetryAfter+7 || got == base || refusals[r].RetryAfter != base.RetryAfter {
		t.Fatalf("retry %d (table %d), want %d on a copy", got.RetryAfter, refusals[r].RetryAfter, base.RetryAfter+7)
	}
}
