package transport

import (
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/sanitize"
)

// buildRedactor collects every secret the gateway knows by value (provider
// keys, the management key, the tenant secret, the self-loop and Bifrost
// keys, tenant and relay keys named by environment variable): the logger
// and every passed-through upstream error redact them whatever their
// shape, besides the secret shapes sanitize recognises. A reload adds the
// secrets of the file it loads (secrets); none is ever dropped, as a
// stream in flight may still carry an old key.
func (g *Gateway) buildRedactor() *sanitize.Redactor {
	e := &g.opts.Env
	known := []string{e.Server.ManagementKey, e.Server.TenantSecret, e.Cluster.ClusterSecret, e.Admission.SelfLoopKey(), e.Relay.BifrostKey()}
	return sanitize.NewRedactor(append(known, g.secrets(g.opts.File, g.cat)...)...)
}

// secrets are the values a config file and its catalog name: the
// connections' API keys and the tenant and relay keys of the environment
// variables the file names.
func (g *Gateway) secrets(f *config.File, cat *catalog.Catalog) []string {
	var known []string
	for _, c := range cat.Connections {
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
	for _, t := range f.Tenants {
		lookup(t.KeyEnv)
	}
	if r := f.Relay; r != nil {
		for _, t := range r.Tokens {
			lookup(t.TokenEnv)
		}
	}
	return known
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
