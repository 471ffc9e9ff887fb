package mockprovider

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
)

// ChildEnv is the environment variable that makes RunIfChild take over a
// process; StartProcess sets it.
const ChildEnv = "OMNIROUTE_MOCKPROVIDER_CHILD"

// ReadyPrefix starts the single line Main prints on stdout once it serves;
// the address follows it.
const ReadyPrefix = "mockprovider listening on http://"

// Main is the command line: flags --listen (default 127.0.0.1:0),
// --behavior (default behaviour as JSON), --strict (the default
// behaviour refuses what real providers refuse) and --quiet. It prints exactly one
// line, ReadyPrefix+"127.0.0.1:PORT", to stdout when ready, serves until
// SIGINT or SIGTERM, then shuts down gracefully and returns 0. Errors go to
// stderr with exit code 2 (usage) or 1 (runtime).
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mockprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	behavior := fs.String("behavior", "", `default behaviour as JSON, e.g. '{"latency_ms":20,"chunk_count":8}'`)
	quiet := fs.Bool("quiet", false, "do not log to stderr")
	strict := fs.Bool("strict", false, "refuse what the real provider of each requested model refuses (strict mode of the default behaviour)")
	reqLog := fs.Int("request-log", 0, "keep a record of up to this many model requests (GET /_mock/requests; 0: off)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mockprovider: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var def Behavior
	if *behavior != "" {
		b, err := ParseBehavior([]byte(*behavior))
		if err != nil {
			fmt.Fprintf(stderr, "mockprovider: --behavior: %v\n", err)
			return 2
		}
		def = b
	}
	def.Strict = def.Strict || *strict
	var logf func(string, ...any)
	if !*quiet {
		logf = log.New(stderr, "", log.LstdFlags|log.Lmicroseconds).Printf
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := New(Options{Default: def, Logf: logf, RequestLog: RequestLogOptions{Max: max(*reqLog, 0)}})
	addr, err := srv.Start(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "mockprovider: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s%s\n", ReadyPrefix, addr)
	<-ctx.Done()
	stop()
	if err := srv.Close(); err != nil {
		fmt.Fprintf(stderr, "mockprovider: %v\n", err)
		return 1
	}
	return 0
}

// RunIfChild turns the current process into the mock when ChildEnv is "1",
// exiting with Main's status; otherwise it returns at once. Test binaries
// call it first in TestMain so StartProcess can re-execute them as the mock.
func RunIfChild() {
	if os.Getenv(ChildEnv) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
}
