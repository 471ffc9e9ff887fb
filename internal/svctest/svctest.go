// Package svctest is a helper child process for supervisor tests, in the
// style of hashicorp/go-plugin's helper process: a test binary calls
// RunIfChild first in TestMain, and a supervisor spawns the same binary
// with ModeEnv set to make it behave as a well-behaved service, a crashing
// one, one that forks a grandchild, one that ignores SIGTERM, and so on.
// No external program is needed.
package svctest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/omniroute/gateway/internal/config"
)

// Environment variables the child reads.
const (
	// ModeEnv selects the behaviour (one of the Mode constants).
	ModeEnv = "OMNIROUTE_SVCTEST_MODE"
	// AddrEnv is the host:port to listen on.
	AddrEnv = "OMNIROUTE_SVCTEST_ADDR"
	// NameEnv is the service name reported by /health (default "svctest").
	NameEnv = "OMNIROUTE_SVCTEST_NAME"
	// ExitAfterEnv makes a serving child exit with code 7 after that many
	// milliseconds.
	ExitAfterEnv = "OMNIROUTE_SVCTEST_EXIT_AFTER_MS"
	// HideNonceEnv (any value) makes /health leave out the supervisor's
	// nonce, as a third-party sidecar would: the supervisor must then prove
	// ownership another way.
	HideNonceEnv = "OMNIROUTE_SVCTEST_HIDE_NONCE"
)

// The modes.
const (
	// Serve answers GET /health with {"service":<name>,"instance":<random>,
	// "nonce":<the supervisor's nonce, config.ServiceNonceEnv>}
	// and POST /emit?line=x by printing x to stdout; POST /sick makes /health
	// answer 503 from then on; exits 0 on SIGTERM.
	Serve = "serve"
	// Grandchild serves and also runs sh -c 'sleep 300 & echo ...; wait',
	// printing "grandchild <pid>" to stdout.
	Grandchild = "grandchild"
	// IgnoreTerm serves and ignores SIGTERM (only SIGKILL ends it).
	IgnoreTerm = "ignore-term"
	// Crash prints a line to stderr and exits with code 3 at once.
	Crash = "crash"
	// Unhealthy listens but answers /health with 503.
	Unhealthy = "unhealthy"
)

// RunIfChild turns the process into the helper when ModeEnv is set.
func RunIfChild() {
	mode := os.Getenv(ModeEnv)
	if mode == "" {
		return
	}
	os.Exit(run(mode))
}

func run(mode string) int {
	fmt.Fprintf(os.Stderr, "svctest %s starting pid %d\n", mode, os.Getpid())
	if mode == Crash {
		fmt.Fprintln(os.Stderr, "svctest crashing on purpose")
		return 3
	}
	name := os.Getenv(NameEnv)
	if name == "" {
		name = "svctest"
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	instance := hex.EncodeToString(raw[:])
	nonce := os.Getenv(config.ServiceNonceEnv)
	if os.Getenv(HideNonceEnv) != "" {
		nonce = ""
	}
	ln, err := net.Listen("tcp", os.Getenv(AddrEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "svctest listen:", err)
		return 1
	}
	var sick atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/sick", func(w http.ResponseWriter, r *http.Request) {
		sick.Store(true)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if mode == Unhealthy || sick.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"service":%q,"instance":%q,"pid":%d,"nonce":%q}`, name, instance, os.Getpid(), nonce)
	})
	mux.HandleFunc("/emit", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(os.Stdout, r.URL.Query().Get("line"))
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck
	if mode == Grandchild {
		cmd := exec.Command("sh", "-c", "sleep 300 & echo grandchild $!; wait")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "svctest grandchild:", err)
			return 1
		}
	}
	fmt.Fprintf(os.Stdout, "svctest ready on %s instance %s\n", ln.Addr(), instance)
	sigs := []os.Signal{syscall.SIGTERM, os.Interrupt}
	if mode == IgnoreTerm {
		signal.Ignore(syscall.SIGTERM)
		sigs = []os.Signal{os.Interrupt}
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()
	var exitAfter <-chan time.Time
	if ms, err := strconv.Atoi(os.Getenv(ExitAfterEnv)); err == nil && ms > 0 {
		exitAfter = time.After(time.Duration(ms) * time.Millisecond)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(os.Stdout, "svctest got SIGTERM, exiting")
		_ = srv.Close()
		return 0
	case <-exitAfter:
		fmt.Fprintln(os.Stderr, "svctest exiting after its configured run time")
		return 7
	}
}
