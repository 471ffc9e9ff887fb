package services

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// probeResult is the outcome of one health request (and, before a spawn,
// of a TCP connect to the port).
type probeResult struct {
	ok       bool   // 2xx, and the identity matched when one is required
	inUse    bool   // something accepted a TCP connection on the port
	instance string // "instance" of the health JSON, if any
	service  string // "service" of the health JSON, if any
	nonce    string // "nonce" of the health JSON, if any
	detail   string // why it failed, for lastError
	// stranger: the answer came from a process the gateway did not start
	// (provesOwn).
	stranger bool
}

// healthIdentity is what a health answer may say about itself (the mock
// provider's GET /_mock/health shape).
type healthIdentity struct {
	Service  string `json:"service"`
	Instance string `json:"instance"`
	Nonce    string `json:"nonce"`
}

// probe sends GET http://127.0.0.1:<port><path> with timeout. With
// identity set, a 2xx is healthy only when its JSON names that service.
func probe(ctx context.Context, hc *http.Client, s *Spec, timeout time.Duration) probeResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + s.Addr() + s.HealthPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return probeResult{detail: err.Error()}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "omniroute-supervisor")
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return probeResult{detail: fmt.Sprintf("health check timed out after %dms", timeout.Milliseconds())}
		}
		return probeResult{detail: "health check failed: " + errText(err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	r := probeResult{inUse: true}
	var id healthIdentity
	if json.Unmarshal(body, &id) == nil {
		r.service, r.instance, r.nonce = id.Service, id.Instance, id.Nonce
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.detail = "health check answered HTTP " + strconv.Itoa(resp.StatusCode)
		return r
	}
	if s.Identity != "" && r.service != s.Identity {
		if r.service == "" {
			r.detail = fmt.Sprintf("the health answer does not identify itself as %q", s.Identity)
		} else {
			r.detail = fmt.Sprintf("the health answer identifies itself as %q, not %q", r.service, s.Identity)
		}
		return r
	}
	r.ok = true
	return r
}

// portInUse reports whether something accepts TCP connections on addr.
func portInUse(addr string, timeout time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// errText strips Go's "Get \"url\": " prefix so messages stay short.
func errText(err error) string {
	var ue interface{ Unwrap() error }
	if u, ok := err.(interface{ Unwrap() error }); ok {
		ue = u
	}
	if ue != nil && ue.Unwrap() != nil {
		return ue.Unwrap().Error()
	}
	return err.Error()
}

// provesOwn checks that a healthy answer came from the process this start
// spawned, not from another process that took the port: an answer that
// carries a nonce must carry this start's (config.ServiceNonceEnv), and,
// where the system tells (Linux), the listening socket must belong to the
// child's process group. A child that echoes no nonce is judged by the
// socket alone; where neither can be checked the answer is taken on trust
// while the child runs.
func provesOwn(r probeResult, s *Spec, nonce string, pgid int) probeResult {
	switch {
	case r.nonce != "" && r.nonce != nonce:
		r.detail = "the health answer carries another start's nonce: a process this gateway did not start serves the port"
	case pgid > 0:
		owned, known := listenerOwnedByGroup(s.Port, pgid)
		if !known || owned {
			return r
		}
		r.detail = fmt.Sprintf("port %d is served by a process outside the service's process group (this gateway did not start it)", s.Port)
	default:
		return r
	}
	r.ok, r.stranger = false, true
	return r
}

// newNonce returns a fresh random nonce for one start.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
