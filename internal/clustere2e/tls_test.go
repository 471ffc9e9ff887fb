package clustere2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/etcdtest"
)

// startTLSEtcd runs a one-member etcd whose clients must speak TLS and
// present a certificate of p's CA.
func startTLSEtcd(t *testing.T, p *testutil.PKI) string {
	t.Helper()
	cert, key := p.Issue(t, "etcd-server")
	client := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))}
	cfg := etcdConfig(t.TempDir(), client, etcdtest.FreePort(t))
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: p.CAFile, ClientCertAuth: true}
	e := runEtcd(t, cfg)
	t.Cleanup(e.Close)
	return client.Host
}

// TestTLSCluster: two nodes joined through an etcd that requires client
// certificates, speaking mutual TLS between them, share a tenant's
// concurrency cap (its grain lives on one node, so the other reaches it
// over the TLS remote layer); a node without an etcd client certificate
// does not start, and says why.
func TestTLSCluster(t *testing.T) {
	pki := testutil.NewPKI(t, "cluster")
	etcdAddr := startTLSEtcd(t, pki)
	exe := buildGateway(t)
	mock, mockAddr := startMock(t, map[string]mockprovider.Behavior{"m-capped": {LatencyMS: 20, CompletionTokens: 5}})
	cfgPath := testutil.WriteConfig(t, `{"providers": {"mock": {"base_url": "http://`+mockAddr+`/v1", "apis": ["chat"], "auth": "none", "connections": {"free": {}}}},
	  "models": {"capped": {"targets": [{"connection": "mock/free", "model": "m-capped"}]}},
	  "tenants": [{"name": "capped", "key_env": "CAPPED_KEY", "max_concurrent": 10}],
	  "auth": {"mode": "open", "allow_anonymous": true}}`)
	etcdCert, etcdKey := pki.Issue(t, "etcd-client")
	tlsEnv := func(name string) []string {
		cert, key := pki.Issue(t, name)
		// Certificates instead of the secret: one or the other.
		return []string{"OMNIROUTE_CLUSTER_SECRET=", "OMNIROUTE_CLUSTER_TLS_CA=" + pki.CAFile, "OMNIROUTE_CLUSTER_TLS_CERT=" + cert, "OMNIROUTE_CLUSTER_TLS_KEY=" + key,
			"OMNIROUTE_CLUSTER_ETCD_CA=" + pki.CAFile, "OMNIROUTE_CLUSTER_ETCD_CERT=" + etcdCert, "OMNIROUTE_CLUSTER_ETCD_KEY=" + etcdKey}
	}
	ns := startCluster(t, exe, cfgPath, etcdAddr, 2, func(i int) []string { return tlsEnv(fmt.Sprintf("node-%d", i)) })
	// The cap's grain lives on one of the two: both nodes' requests need
	// it, so one of them calls it over the remote layer. The first request
	// on each node finds its pool cold and waits for the first lease.
	client := &http.Client{Timeout: 30 * time.Second}
	before := mock.Stats().Models["m-capped"].Requests
	for i, n := range ns {
		for k := 0; k < 5; k++ {
			a, err := chat(client, n.addr, cappedKy, "capped")
			if err != nil || a.status != 200 {
				n.mu.Lock()
				t.Fatalf("node %d, capped request %d: %+v %v\n%s", i, k, a, err, n.errs.String())
			}
		}
	}
	if got := mock.Stats().Models["m-capped"].Requests - before; got != int64(2*5) {
		t.Fatalf("the mock served %d capped requests, want 10", got)
	}

	// The remote layer itself speaks TLS with the cluster's CA and wants a
	// client certificate.
	var self string
	for _, m := range ns[0].health(t).Cluster.Members {
		if m.Self {
			self = m.Address
		}
	}
	caPEM, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	conn, err := tls.Dial("tcp", self, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("the remote layer at %s did not present a certificate of the cluster's CA: %v", self, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	conn.Close()
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("the remote layer at %s served a peer without a client certificate (read: %v)", self, err)
	}

	// Without a client certificate, etcd refuses the node: it stops with
	// the reason instead of serving alone.
	env := tlsEnv("no-etcd-cert")
	out := mustFailToStart(t, nodeCmd(t, exe, cfgPath, etcdAddr, env[:5]...), "a node without an etcd client certificate") // no _ETCD_CERT, _ETCD_KEY
	if !strings.Contains(out, "no etcd endpoint answered") || !strings.Contains(out, "OMNIROUTE_CLUSTER_ETCD_CERT") {
		t.Fatalf("a node without an etcd client certificate exited without saying why:\n%s", out)
	}
}
