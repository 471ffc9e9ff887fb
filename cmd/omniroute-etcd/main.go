// Command omniroute-etcd runs a one-member etcd (go.etcd.io/etcd/server/v3,
// embedded) on loopback for trying cluster mode on one machine without
// installing etcd. It is a development aid, not a production etcd: one
// member, no TLS, no authentication, loopback only.
//
//	go run ./cmd/omniroute-etcd --data-dir /tmp/omniroute-etcd --client 127.0.0.1:2379 --peer 127.0.0.1:2380
package main

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dir := flag.String("data-dir", "omniroute-etcd.data", "etcd's data directory (created if missing)")
	client := flag.String("client", "127.0.0.1:2379", "client address (loopback host:port)")
	peer := flag.String("peer", "127.0.0.1:2380", "peer address (loopback host:port)")
	flag.Parse()
	for _, a := range []string{*client, *peer} {
		host, _, err := net.SplitHostPort(a)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			fmt.Fprintf(os.Stderr, "omniroute-etcd: %q is not a loopback host:port; this development etcd serves loopback only (use a real etcd cluster otherwise)\n", a)
			os.Exit(2)
		}
	}
	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cfg.LogLevel = "warn"
	cu, pu := url.URL{Scheme: "http", Host: *client}, url.URL{Scheme: "http", Host: *peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "omniroute-etcd: cannot start etcd: %v\n", err)
		os.Exit(1)
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Printf("omniroute-etcd serving on %s (data in %s)\n", *client, *dir)
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "omniroute-etcd: etcd did not become ready within 60 s")
		e.Close()
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-sig:
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "omniroute-etcd: %v\n", err)
	}
	e.Close()
}
