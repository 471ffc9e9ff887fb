package transport

import (
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/transport/edge"
)

// identify is the walk's identify stage: the caller's key names its
// tenant, which every later stage keys on (the ingest queue's fairness,
// the limits, the lanes, the log). It comes first after the edge's
// checks: nothing of the body is read for a caller the gateway refuses.
// (The relay route's is relayIdentify: the relay token.)
func (c *call) identify() bool {
	id, entry, decision := c.g.lim.Identify(c.rc.tenants, edge.Credential(&c.ctx.Request.Header), edge.IsLoopback(c.ctx))
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
