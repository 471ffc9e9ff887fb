package config

import (
	"fmt"
	"net"
	"strings"
)

// ClusterEnv configures cluster mode (docs/cluster.md). With the default
// mode off none of the other variables is read and nothing new starts:
// the gateway is a single node exactly as before.
type ClusterEnv struct {
	// ClusterMode is off (one node) or etcd (members found through etcd).
	ClusterMode ClusterMode `env:"OMNIROUTE_CLUSTER" envDefault:"off"`
	// ClusterName separates clusters sharing one etcd: only members with the same
	// name see each other.
	ClusterName string `env:"OMNIROUTE_CLUSTER_NAME" envDefault:"omniroute"`
	// EtcdEndpoints are the etcd client endpoints, host:port each.
	EtcdEndpoints HostPorts `env:"OMNIROUTE_CLUSTER_ETCD_ENDPOINTS" envDefault:"127.0.0.1:2379"`
	// ClusterListen is the remote layer's listen address (port 0: any free port).
	ClusterListen string `env:"OMNIROUTE_CLUSTER_LISTEN" envDefault:"127.0.0.1:0"`
	// ClusterAdvertise is the host:port other members dial; empty means the
	// listen address (with the port it got).
	ClusterAdvertise string `env:"OMNIROUTE_CLUSTER_ADVERTISE"`
	// ClusterSecret is the members' shared secret: every member derives
	// the same certificate authority from it and the cluster's name, and
	// speaks mutual TLS with a certificate it issues itself under that
	// authority, so only holders of the secret can connect. Cluster mode
	// needs it or the three certificate files below (not both).
	ClusterSecret string `env:"OMNIROUTE_CLUSTER_SECRET" secret:"true"`
	// ClusterTLSCA, ClusterTLSCert and ClusterTLSKey (PEM files, all three
	// or none) make the remote layer mutual TLS under the operator's own
	// CA: a member accepts and dials only members whose certificate the CA
	// signed.
	ClusterTLSCA   string `env:"OMNIROUTE_CLUSTER_TLS_CA"`
	ClusterTLSCert string `env:"OMNIROUTE_CLUSTER_TLS_CERT"`
	ClusterTLSKey  string `env:"OMNIROUTE_CLUSTER_TLS_KEY" secret:"true"`
	// EtcdTLSCA (the CA that signed etcd's server certificate) turns on TLS
	// to etcd; EtcdTLSCert and EtcdTLSKey (together) add a client
	// certificate for an etcd that requires one.
	EtcdTLSCA   string `env:"OMNIROUTE_CLUSTER_ETCD_CA"`
	EtcdTLSCert string `env:"OMNIROUTE_CLUSTER_ETCD_CERT"`
	EtcdTLSKey  string `env:"OMNIROUTE_CLUSTER_ETCD_KEY" secret:"true"`
}

// ClusterMode is off or etcd.
type ClusterMode string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (m *ClusterMode) UnmarshalText(b []byte) error {
	return setWord(m, b, "want off (a single node) or etcd (members found through etcd)", "off", "etcd")
}

// On reports whether cluster mode is enabled.
func (m ClusterMode) On() bool { return m == "etcd" }

// HostPorts is a comma-separated list of host:port.
type HostPorts []string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (h *HostPorts) UnmarshalText(b []byte) error {
	var out []string
	for _, s := range strings.Split(string(b), ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if err := checkHostPort(s, false); err != nil {
			return fmt.Errorf("entry %q: %v; want a comma-separated list of host:port such as 127.0.0.1:2379,10.0.0.2:2379", s, err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return fmt.Errorf("want at least one host:port such as 127.0.0.1:2379")
	}
	*h = out
	return nil
}

// checkHostPort checks host:port with a port of 1-65535 (0 too when
// anyPort).
func checkHostPort(s string, anyPort bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("not host:port")
	}
	if host == "" {
		return fmt.Errorf("no host")
	}
	n, ok := parseNonNegative(port)
	if !ok || n > 65535 || (n == 0 && !anyPort) {
		if anyPort {
			return fmt.Errorf("port must be 0 (any free port) to 65535")
		}
		return fmt.Errorf("port must be 1 to 65535")
	}
	return nil
}

func init() { subsystemValidators = append(subsystemValidators, validateClusterEnv) }

func validateClusterEnv(e *Env) []string {
	c := e.Cluster
	if !c.ClusterMode.On() {
		return nil
	}
	var errs []string
	if !validClusterName(c.ClusterName) {
		errs = append(errs, fmt.Sprintf("OMNIROUTE_CLUSTER_NAME=%q is not a valid cluster name: want 1-64 letters, digits, '-' or '_', the same on every member", c.ClusterName))
	}
	if err := checkHostPort(c.ClusterListen, true); err != nil {
		errs = append(errs, fmt.Sprintf("cannot parse OMNIROUTE_CLUSTER_LISTEN=%q: %v; want host:port such as 10.0.0.1:7946 (port 0: any free port)", c.ClusterListen, err))
	}
	if c.ClusterAdvertise != "" {
		if err := checkHostPort(c.ClusterAdvertise, false); err != nil {
			errs = append(errs, fmt.Sprintf("cannot parse OMNIROUTE_CLUSTER_ADVERTISE=%q: %v; want the host:port other members dial, such as 10.0.0.1:7946", c.ClusterAdvertise, err))
		}
	} else if host, port, err := net.SplitHostPort(c.ClusterListen); err == nil {
		ip := net.ParseIP(host)
		if port != "0" && ip != nil && ip.IsUnspecified() {
			errs = append(errs, fmt.Sprintf("OMNIROUTE_CLUSTER_LISTEN=%q listens on every interface: set OMNIROUTE_CLUSTER_ADVERTISE to the host:port other members dial", c.ClusterListen))
		}
	}
	n := countSet(c.ClusterTLSCA, c.ClusterTLSCert, c.ClusterTLSKey)
	switch {
	case n != 0 && n != 3:
		errs = append(errs, "OMNIROUTE_CLUSTER_TLS_CA, OMNIROUTE_CLUSTER_TLS_CERT and OMNIROUTE_CLUSTER_TLS_KEY go together: set all three (mutual TLS between members) or none")
	case n == 3 && c.ClusterSecret != "":
		errs = append(errs, "OMNIROUTE_CLUSTER_SECRET and OMNIROUTE_CLUSTER_TLS_CA/_CERT/_KEY are both set: members authenticate with one of them; unset the secret to use the certificates, or the certificates to use the secret")
	case n == 0 && c.ClusterSecret == "":
		errs = append(errs, "cluster mode needs members to authenticate each other: set OMNIROUTE_CLUSTER_SECRET to the same random value on every member "+
			"(at least "+fmt.Sprint(MinClusterSecret)+" characters, for example the output of `openssl rand -hex 32`), or give each member a certificate with OMNIROUTE_CLUSTER_TLS_CA, _TLS_CERT and _TLS_KEY")
	case n == 0 && len(c.ClusterSecret) < MinClusterSecret:
		errs = append(errs, fmt.Sprintf("OMNIROUTE_CLUSTER_SECRET is too short (%d characters): want at least %d characters of random data, the same on every member, for example the output of `openssl rand -hex 32`", len(c.ClusterSecret), MinClusterSecret))
	}
	if (c.EtcdTLSCert == "") != (c.EtcdTLSKey == "") {
		errs = append(errs, "OMNIROUTE_CLUSTER_ETCD_CERT and OMNIROUTE_CLUSTER_ETCD_KEY go together: set both (a client certificate for etcd) or neither")
	} else if c.EtcdTLSCert != "" && c.EtcdTLSCA == "" {
		errs = append(errs, "OMNIROUTE_CLUSTER_ETCD_CERT is set without OMNIROUTE_CLUSTER_ETCD_CA: set the CA that signed etcd's server certificate too")
	}
	return errs
}

// MinClusterSecret is the shortest OMNIROUTE_CLUSTER_SECRET accepted. Anyone
// who can open a TLS connection to a member sees a certificate signed
// under the secret and can test guesses of it offline, so it must be
// random and long, not a password.
const MinClusterSecret = 32

func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}

func validClusterName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
