// Command omniroute is the gateway. With no arguments it serves: on the
// embedded default configuration (model "demo" answered by the bundled mock
// provider) when OMNIROUTE_CONFIG is unset, so a fresh checkout answers a
// chat completion with no file and no network.
//
//	omniroute [serve]        run the gateway (default)
//	omniroute mockprovider   run the bundled mock provider
//	omniroute version        print the version, module and VCS revision
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(sig)
		return run(args, nil, stdout, stderr, sig)
	case "mockprovider":
		return mockprovider.Main(args)
	case "version", "--version", "-v":
		bi, ok := debug.ReadBuildInfo()
		fmt.Fprint(stdout, versionText(bi, ok, version))
		return 0
	case "help", "--help", "-h":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "omniroute: unknown command %q\n%s\n", cmd, usage)
	return 2
}

const usage = `usage: omniroute [serve|mockprovider|version|help]

  serve         run the gateway (default); settings come from OMNIROUTE_* environment
                variables and the JSON file named by OMNIROUTE_CONFIG (see README.md)
  mockprovider  run the bundled mock LLM provider (--listen, --behavior)
  version       print the version, module and VCS revision`
