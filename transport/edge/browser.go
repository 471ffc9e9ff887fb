package edge

import (
	"bytes"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/ascii"
	"github.com/omniroute/gateway/internal/config"
)

// The browser policy. The gateway's callers are programs (SDKs, agents,
// curl); a web page the operator happens to visit is not one, yet a
// browser will send it requests to 127.0.0.1: a "simple" cross-origin
// POST (text/plain, no preflight, response unreadable but the side effect
// happens), or, through DNS rebinding, same-origin requests whose Host is
// the attacker's name. So, on every route:
//
//   - Host must be an IP literal, localhost, the host of OMNIROUTE_LISTEN
//     or a name in OMNIROUTE_ALLOWED_HOSTS: a rebinding page always sends
//     its own name (403 host_not_allowed).
//   - Origin, when a browser sends it, must be the gateway's own origin or
//     one in OMNIROUTE_CORS_ORIGINS (403 origin_not_allowed); management
//     routes also refuse Sec-Fetch-Site: cross-site without an allowed
//     Origin. Allowed cross-origin requests get CORS headers, and their
//     preflight (OPTIONS) is answered here.
//   - Inference needs a JSON body (a simple request cannot send one), and
//     a management request that changes state may carry only a JSON body,
//     or no body and no Content-Type (checked by the routes).
type browserPolicy struct {
	hosts   []string // lower-case names accepted besides IP literals and localhost
	origins []string // lower-case allowed cross-origin origins
}

func newBrowserPolicy(e *config.Env) browserPolicy {
	p := browserPolicy{hosts: append([]string(nil), e.HTTP.AllowedHosts...), origins: append([]string(nil), e.HTTP.CORSOrigins...)}
	if h := e.ListenHost(); h != "" {
		if _, err := netip.ParseAddr(h); err != nil {
			p.hosts = append(p.hosts, h) // a name to listen on is a name to be called by
		}
	}
	return p
}

// hostAllowed judges a Host header value. An empty Host (HTTP/1.0) is
// allowed: browsers always send one.
func (p *browserPolicy) hostAllowed(host []byte) bool {
	if len(host) == 0 {
		return true
	}
	name := hostName(host)
	if len(name) == 0 {
		return false
	}
	if name[0] == '[' { // [v6]
		if name[len(name)-1] != ']' {
			return false
		}
		_, err := netip.ParseAddr(string(name[1 : len(name)-1]))
		return err == nil
	}
	if isIPv4Literal(name) || bytes.EqualFold(name, []byte("localhost")) {
		return true
	}
	for _, h := range p.hosts {
		if bytes.EqualFold(name, []byte(h)) {
			return true
		}
	}
	return false
}

// hostName strips the port from a Host value ("[::1]:80" → "[::1]").
func hostName(host []byte) []byte {
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && !bytes.Contains(host[i:], []byte("]")) {
		if bytes.Count(host, []byte(":")) == 1 || host[0] == '[' {
			return host[:i]
		}
	}
	return host
}

// isIPv4Literal accepts four dot-separated decimal octets (no
// allocation: it runs for every request).
func isIPv4Literal(b []byte) bool {
	for parts := 1; ; parts++ {
		octet, end := b, bytes.IndexByte(b, '.')
		if end >= 0 {
			octet = b[:end]
		}
		if n, ok := ascii.ParseDigits(octet); !ok || len(octet) > 3 || n > 255 {
			return false
		}
		if end < 0 {
			return parts == 4
		}
		b = b[end+1:]
	}
}

// originAllowed reports whether origin may call: it is the gateway's own
// origin (its host:port is the request's Host), or it is listed. cors is
// true for a listed cross-origin caller, which gets CORS headers.
func (p *browserPolicy) originAllowed(origin, host []byte) (ok, cors bool) {
	o := bytes.TrimSuffix(origin, []byte("/"))
	if i := bytes.Index(o, []byte("://")); i > 0 && len(host) > 0 && bytes.EqualFold(o[i+3:], host) {
		return true, false
	}
	for _, a := range p.origins {
		if bytes.EqualFold(o, []byte(a)) {
			return true, true
		}
	}
	return false, false
}

// exposedHeaders are the response headers a cross-origin caller may read.
const exposedHeaders = "X-Request-Id, X-OmniRoute-Target, X-OmniRoute-Fallbacks, X-Upstream-Request-Id, X-Should-Retry, " +
	"X-OmniRoute-Priority, X-OmniRoute-Admission-Wait-Ms, X-OmniRoute-Skipped-Targets, X-Omniroute-Admission-Reason, Retry-After, " +
	"Request-Id, X-OmniRoute-Translated, X-OmniRoute-Dropped"

// guardBrowser applies the policy before a request is routed (guard is
// the class of the endpoint the path selects). It writes the refusal (or
// the preflight answer) and returns false when the request goes no
// further.
func (e *Edge) guardBrowser(ctx *fasthttp.RequestCtx, r Route, guard Guard, rid []byte) bool {
	p := &e.browser
	h := &ctx.Request.Header
	if !p.hostAllowed(h.Host()) {
		writeIn(ctx, r, rid, apierror.New(apierror.CodeHostNotAllowed, quoteHeader(h.Host())))
		return false
	}
	origin := h.Peek("Origin")
	if len(origin) == 0 {
		if guard.operator() && bytes.EqualFold(h.Peek("Sec-Fetch-Site"), []byte("cross-site")) {
			writeIn(ctx, r, rid, errOrigin("a cross-site page"))
			return false
		}
		return true
	}
	ok, cors := p.originAllowed(origin, h.Host())
	if !ok {
		writeIn(ctx, r, rid, errOrigin(quoteHeader(origin)))
		return false
	}
	if !cors {
		return true
	}
	rh := &ctx.Response.Header
	rh.SetBytesV("Access-Control-Allow-Origin", origin)
	rh.Add("Vary", "Origin")
	if ctx.IsOptions() && len(h.Peek("Access-Control-Request-Method")) > 0 {
		// A preflight: say what the real request may carry.
		rh.Set("Access-Control-Allow-Methods", "GET, POST")
		if req := h.Peek("Access-Control-Request-Headers"); len(req) > 0 && validHeaderList(req) {
			rh.SetBytesV("Access-Control-Allow-Headers", req)
		}
		rh.Set("Access-Control-Max-Age", "600")
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		return false
	}
	rh.Set("Access-Control-Expose-Headers", exposedHeaders)
	return true
}

// validHeaderList accepts a comma-separated list of header names (token
// characters), so a preflight echo cannot inject anything.
func validHeaderList(b []byte) bool {
	if len(b) > 1024 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ',' || c == ' ') {
			return false
		}
	}
	return true
}

func errOrigin(who string) *apierror.Error {
	return apierror.New(apierror.CodeOriginNotAllowed, who)
}

// quoteHeader quotes a header value for a message, bounded.
func quoteHeader(b []byte) string {
	if len(b) > 100 {
		b = b[:100]
	}
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			c = '?'
		}
		sb.WriteByte(c)
	}
	sb.WriteByte('"')
	return sb.String()
}

// Body enforces the content rule for a management request that changes
// state: a JSON body, or no body and no Content-Type. A text/plain or
// form body is what a cross-origin page can send without a preflight, so
// it is refused (415, management dialect) even when empty.
func (e *Edge) Body(ctx *fasthttp.RequestCtx, rid []byte) bool {
	if !managementBodyOK(ctx) {
		writeIn(ctx, Management, rid, errMgmtMediaType)
		return false
	}
	return true
}

func managementBodyOK(ctx *fasthttp.RequestCtx) bool {
	ct := ctx.Request.Header.ContentType()
	if len(ct) > 0 {
		return IsJSONMediaType(ct)
	}
	cl := ctx.Request.Header.ContentLength()
	return cl == 0 || cl == -2 // no body declared (-2: no Content-Length, no chunking)
}

var errMgmtMediaType = apierror.New(apierror.CodeUnsupportedMediaType,
	"a management request that changes state takes a JSON body (Content-Type: application/json) or no body and no Content-Type")

// IsJSONMediaType reports a JSON media type (application/json or any
// +json), the only body a browser cannot send cross-origin without a
// preflight.
func IsJSONMediaType(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = bytes.TrimSpace(ct)
	return bytes.EqualFold(ct, []byte("application/json")) ||
		(len(ct) > 5 && bytes.EqualFold(ct[len(ct)-5:], []byte("+json")))
}
