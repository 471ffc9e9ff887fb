package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestClusterEnv(t *testing.T) {
	f := func(env map[string]string, want ClusterEnv, wantErr string) {
		t.Helper()
		e, err := LoadEnv(env)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("LoadEnv(%v): error %v, want one containing %q", env, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("LoadEnv(%v): %v", env, err)
		}
		if !reflect.DeepEqual(e.Cluster, want) {
			t.Fatalf("LoadEnv(%v).Cluster = %+v, want %+v", env, e.Cluster, want)
		}
	}
	const secret = "0123456789abcdef0123456789abcdef"
	def := ClusterEnv{ClusterMode: "off", ClusterName: "omniroute", EtcdEndpoints: HostPorts{"127.0.0.1:2379"}, ClusterListen: "127.0.0.1:0"}
	f(map[string]string{}, def, "")
	// Off reads nothing else: a bad listen address does not matter.
	off := def
	off.ClusterListen = "nonsense"
	f(map[string]string{"OMNIROUTE_CLUSTER_LISTEN": "nonsense"}, off, "")
	f(map[string]string{"OMNIROUTE_CLUSTER": "ETCD", "OMNIROUTE_CLUSTER_NAME": "prod_1", "OMNIROUTE_CLUSTER_ETCD_ENDPOINTS": " 10.0.0.1:2379 ,10.0.0.2:2379",
		"OMNIROUTE_CLUSTER_LISTEN": "0.0.0.0:7946", "OMNIROUTE_CLUSTER_ADVERTISE": "10.0.0.1:7946", "OMNIROUTE_CLUSTER_SECRET": secret},
		ClusterEnv{ClusterMode: "etcd", ClusterName: "prod_1", EtcdEndpoints: HostPorts{"10.0.0.1:2379", "10.0.0.2:2379"}, ClusterListen: "0.0.0.0:7946", ClusterAdvertise: "10.0.0.1:7946", ClusterSecret: secret}, "")
	tlsOnly := ClusterEnv{ClusterMode: "etcd", ClusterName: "omniroute", EtcdEndpoints: HostPorts{"127.0.0.1:2379"}, ClusterListen: "127.0.0.1:0",
		ClusterTLSCA: "ca.pem", ClusterTLSCert: "node.pem", ClusterTLSKey: "node.key"}
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_TLS_CA": "ca.pem", "OMNIROUTE_CLUSTER_TLS_CERT": "node.pem", "OMNIROUTE_CLUSTER_TLS_KEY": "node.key"}, tlsOnly, "")
	// Members must authenticate each other, on loopback too: a secret or
	// certificates, one of the two.
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd"}, def, "cluster mode needs members to authenticate each other: set OMNIROUTE_CLUSTER_SECRET")
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_SECRET": "short-secret"}, def, "OMNIROUTE_CLUSTER_SECRET is too short (12 characters): want at least 32")
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_SECRET": secret, "OMNIROUTE_CLUSTER_TLS_CA": "ca.pem", "OMNIROUTE_CLUSTER_TLS_CERT": "node.pem", "OMNIROUTE_CLUSTER_TLS_KEY": "node.key"},
		def, "are both set: members authenticate with one of them")
	f(map[string]string{"OMNIROUTE_CLUSTER": "consul"}, def, `cannot parse OMNIROUTE_CLUSTER="consul": want off`)
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_ETCD_ENDPOINTS": "10.0.0.1"}, def, `OMNIROUTE_CLUSTER_ETCD_ENDPOINTS="10.0.0.1": entry "10.0.0.1": not host:port`)
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_ETCD_ENDPOINTS": ","}, def, "want at least one host:port")
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_NAME": "a/b"}, def, `OMNIROUTE_CLUSTER_NAME="a/b" is not a valid cluster name`)
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_LISTEN": "127.0.0.1:70000"}, def, "OMNIROUTE_CLUSTER_LISTEN=\"127.0.0.1:70000\": port must be 0")
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_ADVERTISE": "host:0"}, def, "OMNIROUTE_CLUSTER_ADVERTISE=\"host:0\": port must be 1 to 65535")
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_LISTEN": "0.0.0.0:7946"}, def, "set OMNIROUTE_CLUSTER_ADVERTISE")
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_TLS_CA": "ca.pem", "OMNIROUTE_CLUSTER_TLS_CERT": "node.pem"}, def, "set all three (mutual TLS between members) or none")
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_ETCD_CA": "ca.pem", "OMNIROUTE_CLUSTER_ETCD_KEY": "k.pem"}, def, "set both (a client certificate for etcd) or neither")
	f(map[string]string{"OMNIROUTE_CLUSTER": "etcd", "OMNIROUTE_CLUSTER_ETCD_CERT": "c.pem", "OMNIROUTE_CLUSTER_ETCD_KEY": "k.pem"}, def, "without OMNIROUTE_CLUSTER_ETCD_CA")
}
