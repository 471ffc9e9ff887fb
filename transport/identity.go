package transport

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/config"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/transport/edge"
)

func buildTenants(o Options) (*tenant.Resolver, error) {
	f := o.File
	mode, err := tenant.ParseMode(f.AuthMode())
	if err != nil {
		return nil, err
	}
	var specs []tenant.Spec
	for i, t := range f.Tenants {
		d, err := tenantDigest(o, i, t)
		if err != nil {
			return nil, err
		}
		specs = append(specs, tenant.Spec{Name: t.Name, KeySHA256: d})
	}
	secret, err := tenant.LoadOrCreateSecret(o.Env.Server.TenantSecret, o.Env.ResolvedDataDir())
	if err != nil {
		return nil, err
	}
	return tenant.NewResolver(secret, mode, f.Auth.AllowAnonymous, specs)
}

// tenantDigest is the SHA-256 of config tenant i's key: from the
// variable key_env names, or key_sha256.
func tenantDigest(o Options, i int, t config.Tenant) ([32]byte, error) {
	var d [32]byte
	if t.KeyEnv != "" {
		v, ok := o.Getenv(t.KeyEnv)
		if !ok || v == "" {
			return d, fmt.Errorf("tenants[%d].key_env: environment variable %s is not set; export the tenant's API key there", i, t.KeyEnv)
		}
		return sha256.Sum256([]byte(v)), nil
	}
	if _, err := hex.Decode(d[:], []byte(t.KeySHA256)); err != nil {
		return d, fmt.Errorf("tenants[%d].key_sha256: %v", i, err)
	}
	return d, nil
}

// credential returns the caller's API key from the headers of the
// dialect table's auth styles (Authorization: Bearer, x-api-key,
// x-goog-api-key), in that order, trimmed. The slice aliases the request
// header.
func credential(h *fasthttp.RequestHeader) []byte {
	if a := h.Peek(fasthttp.HeaderAuthorization); len(a) > 7 && bytes.EqualFold(a[:7], []byte("bearer ")) {
		if k := bytes.TrimSpace(a[7:]); len(k) > 0 {
			return k
		}
	}
	if k := bytes.TrimSpace(h.Peek(xAPIKeyHeader)); len(k) > 0 {
		return k
	}
	return bytes.TrimSpace(h.Peek(googAPIKeyHeader))
}

// The headers of the key-only auth styles, read from the table once.
var (
	xAPIKeyHeader    = dia.AuthHeader(dia.AuthXAPIKey)
	googAPIKeyHeader = dia.AuthHeader(dia.AuthGoogAPIKey)
)

// identify is the walk's identify stage: the caller's key names its
// tenant, which every later stage keys on (the ingest queue's fairness,
// the limits, the lanes, the log). It comes first after the edge's
// checks: nothing of the body is read for a caller the gateway refuses.
// (The relay route's is relayIdentify: the relay token.)
func (c *call) identify() bool {
	id, entry, decision := c.g.lim.Identify(c.rc.tenants, credential(&c.ctx.Request.Header), edge.IsLoopback(c.ctx))
	c.ten.Entry = entry
	if e := keyError(decision); e != nil {
		c.fail(e)
		return false
	}
	c.tenant = id
	return true
}

var errRetiredKey = apierror.New(apierror.CodeInvalidAPIKey,
	"the API key was revoked or rotated; use the key's current secret or ask the gateway operator for a new key")

// keyError is the answer to a key the resolver refused, nil for an
// allowed one: the handler's and the ExpectHandler's (expectCaller).
func keyError(d tenant.Decision) *apierror.Error {
	switch d {
	case tenantMissing:
		return errMissingKey
	case tenantInvalid:
		return errInvalidKey
	case tenant.Retired:
		return errRetiredKey
	}
	return nil
}
