package transport_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/svctest"
)

// callAs runs one request through the gateway's handler with a crafted
// peer address (fasthttp's RequestCtx.Init), the way the socket layer
// would hand it over.
func callAs(g *gwEnv, peer, method, path, auth string) (int, []byte, *fasthttp.ResponseHeader) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	host, port, _ := net.SplitHostPort(peer)
	addr := &net.TCPAddr{IP: net.ParseIP(host)}
	addr.Port, _ = net.LookupPort("tcp", port)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, addr, nil)
	g.gw.Handler(&ctx)
	return ctx.Response.StatusCode(), append([]byte(nil), ctx.Response.Body()...), &ctx.Response.Header
}

func localOnlyBody(t *testing.T, status int, body []byte, h *fasthttp.ResponseHeader) {
	t.Helper()
	var e struct {
		Error struct {
			Code, Message string
			Correlation   string `json:"correlation_id"`
		} `json:"error"`
	}
	if status != 403 || json.Unmarshal(body, &e) != nil || e.Error.Code != "LOCAL_ONLY" ||
		e.Error.Message != "This endpoint requires localhost access" || e.Error.Correlation == "" ||
		string(h.Peek("X-Request-Id")) != e.Error.Correlation || string(h.Peek("X-OmniRoute-Route-Class")) != "local-only" {
		t.Fatalf("want 403 LOCAL_ONLY, got %d %s", status, body)
	}
}

func TestLocalOnlyGuardByPeerClass(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		env := map[string]string{}
		if keyed {
			env["OMNIROUTE_MANAGEMENT_KEY"] = "mgmt-key-123"
		}
		g := startGW(t, withServices(t, map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, nil)}), gwOpts{env: env})
		cases := []struct {
			peer string
			auth string
			want int // 403 = LOCAL_ONLY
		}{
			{"8.8.8.8:5000", "", 403},
			{"203.0.113.9:5000", "Bearer mgmt-key-123", 403}, // before authentication: the key does not help
			{"[2001:db8::1]:5000", "", 403},
			{"169.254.169.254:80", "", 403},
			{"127.0.0.1:5000", "", 200},
			{"127.9.9.9:5000", "", 200},
			{"[::1]:5000", "", 200},
			{"[::ffff:127.0.0.1]:5000", "", 200},
			{"10.1.2.3:5000", "", 401},
			{"172.20.0.5:5000", "", 401},
			{"192.168.1.7:5000", "", 401},
			{"100.100.1.1:5000", "", 401}, // Tailscale CGNAT
			{"[fd12::5]:5000", "", 401},
			{"[fe80::1]:5000", "", 401},
			{"192.168.1.7:5000", "Bearer mgmt-key-123", 200},
			{"127.0.0.1:5000", "Bearer wrong", 401},
		}
		for _, tc := range cases {
			want := tc.want
			if want == 200 && keyed && tc.auth != "Bearer mgmt-key-123" {
				want = 401 // with a key set, loopback needs it too
			}
			if want == 200 && !keyed && tc.auth == "Bearer mgmt-key-123" && !strings.HasPrefix(tc.peer, "127.") {
				want = 401 // no key configured: other machines are refused
			}
			if want == 401 && !keyed && tc.auth == "Bearer wrong" {
				want = 200 // no key configured: loopback is in, whatever it sends
			}
			for _, path := range []string{"/api/services/svc/status", "/api/services/svc/start", "/api/services", "/api/engines"} {
				method := "GET"
				if strings.HasSuffix(path, "/start") {
					method = "POST"
					if want == 200 {
						continue // do not spawn from a table test
					}
				}
				status, body, h := callAs(g, tc.peer, method, path, tc.auth)
				switch want {
				case 403:
					localOnlyBody(t, status, body, h)
				case 401:
					if status != 401 || !strings.Contains(string(body), `"type":"authentication_error"`) || len(h.Peek("WWW-Authenticate")) == 0 {
						t.Fatalf("keyed=%v %s %s %s: want 401, got %d %s", keyed, tc.peer, tc.auth, path, status, body)
					}
				default:
					if status != want {
						t.Fatalf("keyed=%v %s %s %s: want %d, got %d %s", keyed, tc.peer, tc.auth, path, want, status, body)
					}
				}
			}
		}
		if st := g.service("svc").Status(); st.State != "stopped" {
			t.Fatalf("a refused request started the service: %+v", st)
		}
	}
}

// TestLocalOnlyGuardFromNonLoopbackSocket binds the gateway on an address
// of this machine that is neither loopback nor private and calls it from
// that address, so the guard sees a real non-local socket peer. When the
// machine has no such address, the test adds one to the loopback device
// (needs root and ip(8)); failing both, it falls back to a crafted peer
// address through RequestCtx.Init and says so in its log.
func TestLocalOnlyGuardFromNonLoopbackSocket(t *testing.T) {
	ip := publicLocalAddr()
	how := "existing interface address"
	if ip == nil {
		ip = addTestAddr(t)
		how = "address added to lo for the test"
	}
	f := withServices(t, map[string]config.ServiceConfig{"svc": svcConfig(svctest.Serve, nil)})
	if ip == nil {
		t.Log("no non-local address could be bound here: checking the guard with a crafted peer address (RequestCtx.Init)")
		g := startGW(t, f, gwOpts{})
		status, body, h := callAs(g, "198.51.100.77:40000", "POST", "/api/services/svc/start", "")
		localOnlyBody(t, status, body, h)
		return
	}
	t.Logf("peer %s (%s)", ip, how)
	g := startGW(t, f, gwOpts{listen: net.JoinHostPort(ip.String(), "0")})
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: dialer.DialContext}}
	defer hc.CloseIdleConnections()
	for _, path := range []string{"/api/services/svc/start", "/api/services/svc/logs", "/api/services"} {
		method := "GET"
		if strings.HasSuffix(path, "/start") {
			method = "POST"
		}
		req, _ := http.NewRequest(method, g.base+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body [512]byte
		n, _ := resp.Body.Read(body[:])
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(body[:n]), `"code":"LOCAL_ONLY"`) {
			t.Fatalf("%s %s from %s: %d %s", method, path, ip, resp.StatusCode, body[:n])
		}
	}
	if st := g.service("svc").Status(); st.State != "stopped" {
		t.Fatalf("a remote peer started the service: %+v", st)
	}
	// Inference routes are not local-only: the same peer reaches them.
	req, _ := http.NewRequest("GET", g.base+"/v1/models", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 403 {
		t.Fatal("the guard blocked an inference route")
	}
}

// publicLocalAddr returns an IPv4 address of this machine that is neither
// loopback nor private, or nil.
func publicLocalAddr() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip := n.IP.To4()
		if ip == nil || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || (ip[0] == 100 && ip[1]&0xc0 == 64) {
			continue
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0")); err == nil {
			ln.Close()
			return ip
		}
	}
	return nil
}

// addTestAddr adds 198.51.100.77/32 (TEST-NET-2) to lo for the test, or
// returns nil when that is not permitted.
func addTestAddr(t *testing.T) net.IP {
	const cidr = "198.51.100.77/32"
	if err := exec.Command("ip", "addr", "add", cidr, "dev", "lo").Run(); err != nil {
		return nil
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", cidr, "dev", "lo").Run() })
	ip := net.ParseIP("198.51.100.77").To4()
	if ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0")); err == nil {
		ln.Close()
		return ip
	}
	return nil
}
