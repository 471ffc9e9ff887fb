package edge

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
)

// Peer classes for management routes. The peer is always the socket's
// address: forwarding headers are never trusted, since anyone can send
// them.
type peerClass uint8

const (
	peerRemote peerClass = iota
	peerPrivate
	peerLoopback
)

// privateNets are the ranges the reference treats as local besides
// loopback: RFC 1918, Tailscale's CGNAT range, IPv6 ULA and link-local.
var privateNets = func() []*net.IPNet {
	var out []*net.IPNet
	for _, s := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7", "fe80::/10"} {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			panic(err)
		}
		out = append(out, n)
	}
	return out
}()

// classifyPeer classifies a peer address. IPv4-mapped IPv6 addresses are
// judged as IPv4; all of 127/8 is loopback.
func classifyPeer(ip net.IP) peerClass {
	if ip == nil {
		return peerRemote
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	if ip.IsLoopback() {
		return peerLoopback
	}
	for _, n := range privateNets {
		if n.Contains(ip) {
			return peerPrivate
		}
	}
	return peerRemote
}

// localOnlyBody is the reference's LOCAL_ONLY answer.
func writeLocalOnly(ctx *fasthttp.RequestCtx, rid []byte) {
	ctx.Response.ResetBody()
	ctx.SetStatusCode(fasthttp.StatusForbidden)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("X-OmniRoute-Route-Class", "local-only")
	b := append([]byte(nil), `{"error":{"code":"LOCAL_ONLY","message":"This endpoint requires localhost access","correlation_id":`...)
	b = apierror.AppendString(b, string(rid))
	ctx.SetBody(append(b, "}}"...))
}

// managementKeyOK reports whether the caller sent OMNIROUTE_MANAGEMENT_KEY
// as a bearer token. It compares SHA-256 digests in constant time, so
// neither the key's content nor its length leaks through timing.
func (e *Edge) managementKeyOK(ctx *fasthttp.RequestCtx) bool {
	key := e.env.Server.ManagementKey
	got, ok := bearer(&ctx.Request.Header)
	if key == "" || !ok {
		return false
	}
	a, b := sha256.Sum256(got), sha256.Sum256([]byte(key))
	return len(got) > 0 && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// Access decides a request to a LocalOperator route (services, engines,
// reload, the dashboard snapshot) before any other work. It writes the
// refusal and returns false, or returns true.
//
//  1. A peer that is neither loopback nor in a private range gets 403
//     LOCAL_ONLY, before authentication: these routes spawn processes.
//  2. When OMNIROUTE_MANAGEMENT_KEY is set, every caller, loopback
//     included, must send it as a bearer token (compared in constant
//     time); otherwise 401.
//  3. When it is unset, only loopback peers are let in: a private-range
//     peer gets 401 asking for the key, so that an unset key never lets
//     another machine on the LAN start programs here.
func (e *Edge) Access(ctx *fasthttp.RequestCtx, rid []byte) bool {
	class := classifyPeer(ctx.RemoteIP())
	if class == peerRemote {
		writeLocalOnly(ctx, rid)
		return false
	}
	key := e.env.Server.ManagementKey
	if key == "" {
		if class == peerLoopback {
			return true
		}
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="omniroute-management"`)
		writeManagement(ctx, rid, apierror.New(apierror.CodeManagementKeyRequired))
		return false
	}
	if w := e.keyGuessWait(ctx); w > 0 && hasBearer(ctx) {
		writeManagement(ctx, rid, apierror.New(apierror.CodeTooManyKeyAttempts, tooManyGuesses(ctx, w)))
		return false
	}
	if !e.managementKeyOK(ctx) {
		if hasBearer(ctx) {
			e.keyGuessFailed(ctx)
		}
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="omniroute-management"`)
		writeManagement(ctx, rid, apierror.New(apierror.CodeInvalidManagementKey,
			"management routes need OMNIROUTE_MANAGEMENT_KEY as Authorization: Bearer <key>"))
		return false
	}
	return true
}

// hasBearer reports whether the request carries a bearer token: a key
// attempt, which keyguess.go counts when it is wrong.
func hasBearer(ctx *fasthttp.RequestCtx) bool {
	_, ok := bearer(&ctx.Request.Header)
	return ok
}

// ManagementAllowed reports, without answering, whether Access would let
// the caller in (health shows such callers its full view).
func (e *Edge) ManagementAllowed(ctx *fasthttp.RequestCtx) bool {
	class := classifyPeer(ctx.RemoteIP())
	switch {
	case class == peerRemote:
		return false
	case e.env.Server.ManagementKey == "":
		return class == peerLoopback
	case !hasBearer(ctx):
		return false
	case e.keyGuessWait(ctx) > 0:
		return false // no oracle: the full view would say the key is right
	}
	if !e.managementKeyOK(ctx) {
		e.keyGuessFailed(ctx)
		return false
	}
	return true
}

// Management guards the Operator routes: quota, route preview, keys,
// request log and usage (they spawn nothing, so no LOCAL_ONLY guard). With OMNIROUTE_MANAGEMENT_KEY set, the
// caller must send it as a bearer token (managementKeyOK); without it, only
// loopback callers are answered.
func (e *Edge) Management(ctx *fasthttp.RequestCtx, rid []byte) bool {
	key := e.env.Server.ManagementKey
	if key == "" {
		if IsLoopback(ctx) {
			return true
		}
		WriteError(ctx, apierror.OpenAI, string(rid), apierror.New(apierror.CodeManagementLoopbackOnly))
		return false
	}
	if auth := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization); len(auth) < 7 || !bytes.EqualFold(auth[:7], []byte("bearer ")) {
		WriteError(ctx, apierror.OpenAI, string(rid), apierror.New(apierror.CodeMissingManagementKey))
		return false
	}
	if w := e.keyGuessWait(ctx); w > 0 {
		WriteError(ctx, apierror.OpenAI, string(rid), apierror.New(apierror.CodeTooManyKeyAttempts, tooManyGuesses(ctx, w)))
		return false
	}
	if !e.managementKeyOK(ctx) {
		e.keyGuessFailed(ctx)
		WriteError(ctx, apierror.OpenAI, string(rid), apierror.New(apierror.CodeInvalidManagementKey, "the bearer token is not OMNIROUTE_MANAGEMENT_KEY"))
		return false
	}
	return true
}

// Local refuses a remote peer with 403 LOCAL_ONLY (the LocalPage routes:
// the dashboard's page and assets, which carry no data).
func (e *Edge) Local(ctx *fasthttp.RequestCtx, rid []byte) bool {
	if classifyPeer(ctx.RemoteIP()) == peerRemote {
		writeLocalOnly(ctx, rid)
		return false
	}
	return true
}

// IsLoopback reports a loopback peer (the socket's address).
func IsLoopback(ctx *fasthttp.RequestCtx) bool {
	ip := ctx.RemoteIP()
	return ip != nil && ip.IsLoopback()
}
