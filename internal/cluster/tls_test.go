package cluster

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestTLSFilesErrorsNameTheSetting(t *testing.T) {
	p := testutil.NewPKI(t, "test")
	cert, key := p.Issue(t, "node")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    TLSFiles
		want string
	}{
		{RemoteTLS(filepath.Join(t.TempDir(), "missing.pem"), cert, key), "cannot read OMNIROUTE_CLUSTER_TLS_CA="},
		{RemoteTLS(notPEM, cert, key), "OMNIROUTE_CLUSTER_TLS_CA=" + notPEM + " holds no PEM certificate"},
		{RemoteTLS(p.CAFile, cert, p.CAFile), "cannot load the key pair OMNIROUTE_CLUSTER_TLS_CERT="},
		{EtcdTLS(p.CAFile, key, cert), "OMNIROUTE_CLUSTER_ETCD_CERT="},
	} {
		_, err := c.f.clientConfig()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.f, err, c.want)
		}
	}
	if _, _, err := EtcdTLS(p.CAFile, "", "").mutual(); err == nil {
		t.Error("mutual TLS without a certificate was accepted")
	}
}

// TestRemoteTLSIsMutual: with the configs the remote layer uses, a peer
// with a certificate of the cluster's CA connects, and one without a
// certificate, or with one from another CA, is refused.
func TestRemoteTLSIsMutual(t *testing.T) {
	p := testutil.NewPKI(t, "cluster")
	cert, key := p.Issue(t, "node")
	files := RemoteTLS(p.CAFile, cert, key)
	srv, good, err := files.mutual()
	if err != nil {
		t.Fatal(err)
	}
	dial := tlsServer(t, srv)
	if err := dial(good); err != nil {
		t.Fatalf("a member of the cluster's CA was refused: %v", err)
	}
	noCert := good.Clone()
	noCert.Certificates = nil
	if err := dial(noCert); err == nil {
		t.Fatal("a peer without a certificate connected")
	}
	other := testutil.NewPKI(t, "other")
	ocert, okey := other.Issue(t, "intruder")
	_, oc, err := RemoteTLS(p.CAFile, ocert, okey).mutual()
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(oc); err == nil {
		t.Fatal("a peer with another CA's certificate connected")
	}
}

// tlsServer serves TLS handshakes with srv on loopback until the test
// ends, and returns a dial that reports whether a client with a config
// completes one the server accepts.
func tlsServer(t *testing.T, srv *tls.Config) func(*tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3 reports a refused client certificate on the first read.
		_, err = c.Read(make([]byte, 1))
		if err != nil && strings.Contains(err.Error(), "EOF") {
			return nil // the server closed after a good handshake
		}
		return err
	}
}

// TestSecretTLSAdmitsOnlyHolders: two members of one cluster with one
// secret accept each other both ways (each issued its own certificate);
// a peer with another secret, of another cluster with the same secret,
// or without a certificate is refused, and a member does not accept a
// server that cannot show a certificate under the secret.
func TestSecretTLSAdmitsOnlyHolders(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef-test"
	srvA, cliA, err := SecretTLS("prod", secret)
	if err != nil {
		t.Fatal(err)
	}
	srvB, cliB, err := SecretTLS("prod", secret)
	if err != nil {
		t.Fatal(err)
	}
	if cliA.Certificates[0].Leaf.Equal(cliB.Certificates[0].Leaf) {
		t.Fatal("two members were issued the same certificate")
	}
	dialA, dialB := tlsServer(t, srvA), tlsServer(t, srvB)
	if err := dialA(cliB); err != nil {
		t.Fatalf("member B was refused by member A: %v", err)
	}
	if err := dialB(cliA); err != nil {
		t.Fatalf("member A was refused by member B: %v", err)
	}
	srvO, cliO, err := SecretTLS("prod", secret+"-other")
	if err != nil {
		t.Fatal(err)
	}
	_, cliN, err := SecretTLS("staging", secret)
	if err != nil {
		t.Fatal(err)
	}
	noCert := cliB.Clone()
	noCert.Certificates = nil
	for name, cfg := range map[string]*tls.Config{"another secret": cliO, "another cluster name": cliN, "no certificate": noCert} {
		if err := dialA(cfg); err == nil {
			t.Errorf("a peer with %s connected to a member", name)
		}
	}
	// The other way: a member dialing a server with another secret's
	// certificate refuses it, so it never sends it a message.
	if err := tlsServer(t, srvO)(cliA); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a member accepted a server without a certificate under its secret: %v", err)
	}
}
