package cluster

import (
	"crypto/ed25519"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// A cluster secret (OMNIROUTE_CLUSTER_SECRET) authenticates members with
// mutual TLS and no files to distribute: every member derives the same
// certificate authority from the secret and the cluster's name, issues
// itself a certificate under it at start (a fresh key each start), and
// requires the same of every peer, in both directions. Only a holder of
// the secret can make a certificate the others accept, so a process that
// can reach the remote port but does not hold the secret (another local
// account, a host on the LAN) cannot complete a handshake, let alone send
// a message; and a member never sends a message to a peer that cannot
// prove it holds the secret (a stranger that registered itself in etcd
// receives nothing).
//
// Why a derived CA rather than a token in gRPC metadata: a token is sent
// to whoever is dialed, so a stranger listed in etcd would receive it;
// with the CA, the secret never leaves the process. Go's TLS has no
// pre-shared-key mode, and this gives the same property with the
// certificate machinery the remote layer already uses.
//
// The secret's strength matters: a certificate signed under it is seen by
// anyone who opens a connection, and guesses can be tested against it
// offline. PBKDF2 makes each guess cost about as much as a member's start
// does, and config refuses secrets shorter than config.MinClusterSecret.

// memberServerName is the DNS name every secret-issued member certificate
// carries, and the name a member verifies when it dials another: the
// members' identity is holding the secret, not a host name.
const memberServerName = "member.omniroute.invalid"

// secretIterations is PBKDF2's work factor for deriving the CA key.
const secretIterations = 200_000

// secretCA derives the cluster's CA: an Ed25519 key from the secret and
// the cluster name (another cluster with the same secret has another CA),
// and a self-signed certificate for it. Every input is fixed, so every
// member builds the same certificate.
func secretCA(cluster, secret string) (*x509.Certificate, ed25519.PrivateKey, error) {
	seed, err := pbkdf2.Key(sha256.New, secret, []byte("omniroute cluster CA v1\x00"+cluster), secretIterations, ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: deriving the members' CA from OMNIROUTE_CLUSTER_SECRET: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "omniroute cluster " + cluster},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: creating the members' CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: parsing the members' CA certificate: %w", err)
	}
	return ca, key, nil
}

// issueMember makes this member's certificate under the derived CA: a
// fresh key, valid for both ends of a connection. NotBefore is a day back
// so that members whose clocks disagree still accept each other.
func issueMember(ca *x509.Certificate, caKey ed25519.PrivateKey, now time.Time) (tls.Certificate, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cluster: generating this member's key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cluster: generating a certificate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "omniroute member"},
		DNSNames:     []string{memberServerName},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cluster: issuing this member's certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, nil
}

// SecretTLS is the remote layer's mutual TLS for a cluster secret: srv
// requires a client certificate under the derived CA, cli verifies the
// member it dials against it. Exported for tests that play a peer.
func SecretTLS(cluster, secret string) (srv, cli *tls.Config, err error) {
	ca, key, err := secretCA(cluster, secret)
	if err != nil {
		return nil, nil, err
	}
	cert, err := issueMember(ca, key, time.Now())
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	cli = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: memberServerName, MinVersion: tls.VersionTLS13}
	return srv, cli, nil
}
