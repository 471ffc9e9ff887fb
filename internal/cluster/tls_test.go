package cluster

import (
	"crypto/tls"
	"net"
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
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	dial := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3 reports a refused client certificate on the first read.
		_, err = c.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil
		}
		if err != nil && strings.Contains(err.Error(), "EOF") {
			return nil // the server closed after a good handshake
		}
		return err
	}
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
