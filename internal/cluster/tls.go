package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

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

// remoteOptions are the remote layer's gRPC options for mutual TLS.
// Without them protoactor dials and serves plaintext.
func (f TLSFiles) remoteOptions() ([]grpc.ServerOption, []grpc.DialOption, error) {
	srv, cli, err := f.mutual()
	if err != nil {
		return nil, nil, err
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(srv))},
		[]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cli))}, nil
}
