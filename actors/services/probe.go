package services

import (
	"context"
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
	detail   string // why it failed, for lastError
}

// healthIdentity is what a health answer may say about itself (the mock
// provider's GET /_mock/health shape).
type healthIdentity struct {
	Service  string `json:"service"`
	Instance string `json:"instance"`
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
		r.service, r.instance = id.Service, id.Instance
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
