package transport

import (
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/sanitize"
)

// buildRedactor collects every secret the gateway knows by value (provider
// keys, the management key, the tenant secret, the self-loop and Bifrost
// keys, tenant and relay keys named by environment variable): the logger
// and every passed-through upstream error redact them whatever their
// shape, besides the secret shapes sanitize recognises.
func (g *Gateway) buildRedactor() *sanitize.Redactor {
	e := &g.opts.Env
	known := []string{e.Server.ManagementKey, e.Server.TenantSecret, e.Admission.SelfLoopKey(), e.Relay.BifrostKey()}
	for _, c := range g.cat.Connections {
		known = append(known, c.APIKey())
	}
	lookup := func(name string) {
		if name == "" {
			return
		}
		if v, ok := g.opts.Getenv(name); ok {
			known = append(known, v)
		}
	}
	for _, t := range g.opts.File.Tenants {
		lookup(t.KeyEnv)
	}
	if r := g.opts.File.Relay; r != nil {
		for _, t := range r.Tokens {
			lookup(t.TokenEnv)
		}
	}
	return sanitize.NewRedactor(known...)
}

// redactErrorHeaders redacts the header values of an upstream error
// answer being passed through (a provider may echo the key it was sent).
func (g *Gateway) redactErrorHeaders(h *fasthttp.ResponseHeader) {
	for k, v := range h.All() {
		if red := g.redact.Bytes(v); &red[0] != &v[0] {
			h.SetBytesKV(k, red)
		}
	}
}
