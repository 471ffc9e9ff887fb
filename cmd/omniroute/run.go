package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/omniroute/gateway/internal/actorsys"
	"github.com/omniroute/gateway/internal/cluster"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/logging"
	"github.com/omniroute/gateway/internal/tracing"
	"github.com/omniroute/gateway/transport/gateway"
)

// run serves until a signal other than SIGHUP arrives on sig, then shuts
// down gracefully; SIGHUP re-reads the config file (reloadOnHangup).
// environ overrides the process environment (tests); nil means os.Environ.
func run(args []string, environ map[string]string, stdout, stderr io.Writer, sig <-chan os.Signal) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "omniroute serve takes no arguments (got %q); configure it with OMNIROUTE_* variables\n", args)
		return 2
	}
	env, err := config.LoadEnv(environ)
	if err != nil {
		fmt.Fprintf(stderr, "omniroute: invalid environment: %v\n", err)
		return 2
	}
	log := logging.New(string(env.Server.LogFormat), string(env.Server.LogLevel), stderr)
	file, source, err := loadFile(env)
	if err != nil {
		fmt.Fprintf(stderr, "omniroute: %v\n", err)
		return 2
	}
	getenv := os.LookupEnv
	if environ != nil {
		getenv = func(k string) (string, bool) { v, ok := environ[k]; return v, ok }
	}

	// protoactor's cluster logs routine shutdown events at error level;
	// QuietLogs demotes them (a no-op for a single node, which never logs
	// them).
	actorLog := slog.New(cluster.QuietLogs(logging.AtLeast(log, slog.LevelWarn).Handler())).With("component", "actors")
	system := actorsys.New(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actorLog }))
	defer func() {
		if !system.IsStopped() { // in cluster mode the gateway's Close stopped it
			system.Shutdown()
		}
	}()

	var tp *sdktrace.TracerProvider
	if tracing.Enabled(getenv) {
		var opts []otlptracehttp.Option
		if environ != nil { // the exporter reads the process environment; tests pass theirs
			if v := environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]; v != "" {
				opts = append(opts, otlptracehttp.WithEndpointURL(v))
			} else if v := environ["OTEL_EXPORTER_OTLP_ENDPOINT"]; v != "" {
				opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(v, "/")+"/v1/traces"))
			}
		}
		if tp, err = tracing.New(context.Background(), releaseVersion(), opts...); err != nil {
			fmt.Fprintf(stderr, "omniroute: %v\n", err)
			return 2
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(ctx); err != nil {
				log.Warn("flushing traces at shutdown failed", "err", err)
			}
		}()
		log.Info("exporting traces over OTLP/HTTP")
	}
	o := gateway.Options{Env: env, File: file, Logger: log, Getenv: getenv, Version: releaseVersion()}
	if tp != nil {
		o.TracerProvider = tp
	}
	gw, err := gateway.New(system, o)
	if err != nil {
		fmt.Fprintf(stderr, "omniroute: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", env.Server.Listen)
	if err != nil {
		gw.Close()
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintf(stderr, "omniroute: cannot listen on %s: the address is already in use; stop the other process or set OMNIROUTE_LISTEN to a free host:port\n", env.Server.Listen)
		} else {
			fmt.Fprintf(stderr, "omniroute: cannot listen on %s: %v\n", env.Server.Listen, err)
		}
		return 1
	}
	// Start-up's garbage (decoded config, protoactor's registry before
	// actorsys shrank it, the stores' opening) would stay resident until
	// the runtime's next GC, which an idle gateway reaches only by its
	// two-minute forced collection: one collection now, before the first
	// request, gives it back at once (a few milliseconds, once).
	debug.FreeOSMemory()
	log.Info("omniroute listening", "addr", "http://"+ln.Addr().String(), "config", source, "models", len(gw.Catalog().Models), "version", releaseVersion())
	fmt.Fprintf(stdout, "omniroute listening on http://%s\n", ln.Addr())

	served := make(chan error, 1)
	go func() { served <- gw.Serve(ln) }()
wait:
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				reloadOnHangup(gw, log)
				continue
			}
			log.Info("shutting down", "signal", s.String(), "timeoutMs", int64(env.Server.ShutdownTimeout))
			break wait
		case err := <-served:
			log.Error("server stopped", "err", err)
			gw.Close()
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), env.Server.ShutdownTimeout.Duration())
	defer cancel()
	start := time.Now()
	if err := gw.Shutdown(ctx); err != nil {
		log.Warn("shutdown finished after cancelling in-flight requests", "err", err)
	}
	<-served
	log.Info("stopped", "tookMs", time.Since(start).Milliseconds())
	return 0
}

// reloadOnHangup re-reads the config file on SIGHUP. The gateway logs
// the outcome: the new version, hash and what needs a restart, or, at
// warn level, every error of a refused file (the running config stays).
func reloadOnHangup(gw *gateway.Gateway, log *slog.Logger) {
	log.Info("SIGHUP: re-reading the config file")
	gw.ReloadConfig()
}

func loadFile(env config.Env) (*config.File, string, error) {
	if p := env.Server.ConfigPath; p != "" {
		f, err := config.ReadFile(p)
		return f, p, err
	}
	f, err := config.DefaultFile()
	return f, "embedded default", err
}
