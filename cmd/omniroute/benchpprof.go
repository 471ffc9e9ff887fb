//go:build benchpprof

// This file is compiled only into the benchmark's build of the gateway
// (`go build -tags benchpprof`, which `omniroute-bench --cpuprofile` does).
// It serves net/http/pprof on a listener of its own, named by
// OMNIROUTE_BENCH_PPROF_LISTEN and restricted to loopback. The product
// binary never contains it, and the gateway's listener never serves
// profiles.
package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("OMNIROUTE_BENCH_PPROF_LISTEN")
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(os.Stderr, "omniroute: OMNIROUTE_BENCH_PPROF_LISTEN=%q: want a loopback host:port such as 127.0.0.1:0\n", addr)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "omniroute: cannot listen on OMNIROUTE_BENCH_PPROF_LISTEN=%s: %v\n", addr, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	fmt.Printf("benchpprof listening on http://%s\n", ln.Addr())
	go func() { _ = http.Serve(ln, mux) }()
}
