package refproxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/valyala/fasthttp"
)

// ReadyPrefix starts the line Main prints on stdout once it serves; the
// address follows it.
const ReadyPrefix = "refproxy listening on http://"

// Main runs the proxy as a process: --listen (default 127.0.0.1:0) and
// --upstream (host:port, required). It prints ReadyPrefix+address when
// ready and serves until SIGINT or SIGTERM. Exit codes: 0 clean, 1 runtime
// error, 2 usage.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("refproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := fs.String("upstream", "", "upstream host:port (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *upstream == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "refproxy: usage: refproxy --upstream HOST:PORT [--listen ADDR]")
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "refproxy: cannot listen on %s: %v\n", *listen, err)
		return 1
	}
	p := New(*upstream)
	defer p.Close()
	srv := &fasthttp.Server{Handler: p.Handler}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "%s%s\n", ReadyPrefix, ln.Addr())
	select {
	case <-ctx.Done():
		if err := srv.Shutdown(); err != nil {
			fmt.Fprintf(stderr, "refproxy: shutdown: %v\n", err)
			return 1
		}
		return 0
	case err := <-served:
		fmt.Fprintf(stderr, "refproxy: serve: %v\n", err)
		return 1
	}
}
