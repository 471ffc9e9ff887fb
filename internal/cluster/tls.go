package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSFiles are PEM files: a CA bundle, and a certificate with its key.
type TLSFiles struct {
	// CA verifies the other side: peers (remote layer), etcd's server.
	CA string
	// Cert and Key are this member's own certificate ("" for none).
	Cert, Key string
	// vars name the settings the files came from, for error messages.
	vars [3]string
}

// RemoteTLS is the remote layer's mutual TLS (OMNIROUTE_CLUSTER_TLS_*).
func RemoteTLS(ca, cert, key string) TLSFiles {
	return TLSFiles{CA: ca, Cert: cert, Key: key, vars: [3]string{"OMNIROUTE_CLUSTER_TLS_CA", "OMNIROUTE_CLUSTER_TLS_CERT", "OMNIROUTE_CLUSTER_TLS_KEY"}}
}

// EtcdTLS is TLS to etcd (OMNIROUTE_CLUSTER_ETCD_CA, _CERT, _KEY).
func EtcdTLS(ca, cert, key string) TLSFiles {
	return TLSFiles{CA: ca, Cert: cert, Key: key, vars: [3]string{"OMNIROUTE_CLUSTER_ETCD_CA", "OMNIROUTE_CLUSTER_ETCD_CERT", "OMNIROUTE_CLUSTER_ETCD_KEY"}}
}

// On reports whether TLS is configured (a CA is set).
func (f TLSFiles) On() bool { return f.CA != "" }

// load reads the CA pool and, when set, the key pair.
func (f TLSFiles) load() (*x509.CertPool, []tls.Certificate, error) {
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: cannot read %s=%s: %w", f.vars[0], f.CA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("cluster: %s=%s holds no PEM certificate; point it at the CA bundle", f.vars[0], f.CA)
	}
	if f.Cert == "" {
		return pool, nil, nil
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: cannot load the key pair %s=%s, %s=%s: %w", f.vars[1], f.Cert, f.vars[2], f.Key, err)
	}
	return pool, []tls.Certificate{pair}, nil
}

// clientConfig is the TLS of a connection this member dials: the server
// is verified against the CA (and the host it is dialed by), and the
// member presents its certificate when it has one.
func (f TLSFiles) clientConfig() (*tls.Config, error) {
	pool, certs, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12}, nil
}

// mutual is the remote layer's mutual TLS: the server requires a client
// certificate the CA signed, the client verifies the member it dials.
func (f TLSFiles) mutual() (srv, cli *tls.Config, err error) {
	pool, certs, err := f.load()
	if err != nil {
		return nil, nil, err
	}
	if len(certs) == 0 {
		return nil, nil, fmt.Errorf("cluster: mutual TLS between members needs %s and %s", f.vars[1], f.vars[2])
	}
	srv = &tls.Config{Certificates: certs, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	cli = &tls.Config{Certificates: certs, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return srv, cli, nil
}

// memberTLS is the remote layer's mutual TLS: derived from the cluster
// secret, or the certificate files (pki). Without either there is none,
// and a member refuses to start: on loopback another local account, on a
// network anyone who can route to the port, could otherwise speak to it.
func (c Config) memberTLS() (srv, cli *tls.Config, pki bool, err error) {
	switch {
	case c.Secret != "" && c.RemoteTLS.On():
		return nil, nil, false, fmt.Errorf("cluster: both OMNIROUTE_CLUSTER_SECRET and OMNIROUTE_CLUSTER_TLS_* are set; members authenticate with one of them")
	case c.Secret != "":
		srv, cli, err = SecretTLS(c.Name, c.Secret)
		return srv, cli, false, err
	case c.RemoteTLS.On():
		srv, cli, err = c.RemoteTLS.mutual()
		return srv, cli, true, err
	}
	return nil, nil, false, fmt.Errorf("cluster: members cannot authenticate each other: set OMNIROUTE_CLUSTER_SECRET to the same random value on every member, or OMNIROUTE_CLUSTER_TLS_CA, _TLS_CERT and _TLS_KEY")
}

// remoteOptions are the remote layer's gRPC options: mutual TLS both ways
// and the gate's interceptors on the server. WithDialOptions replaces
// protoactor's default (insecure).
func remoteOptions(srv, cli *tls.Config, g *gate) []remote.ConfigOption {
	so := append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(srv))}, g.serverOptions()...)
	return []remote.ConfigOption{remote.WithServerOptions(so...), remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cli)))}
}
