// Command omniroute-bench is the load benchmark: it measures the gateway
// side by side with a minimal fasthttp reverse proxy (the ceiling) and the
// mock provider reached directly, on loopback, in interleaved rounds, and
// writes JSON, Markdown and HTML reports. See the "Benchmark" section of
// README.md.
//
//	go run ./cmd/omniroute-bench [flags] [scenario...]
//
// It also has a hidden subcommand, `refproxy --listen ADDR --upstream
// HOST:PORT`, which the benchmark runs as the reference proxy process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/omniroute/gateway/bench"
	"github.com/omniroute/gateway/bench/refproxy"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "refproxy" {
		os.Exit(refproxy.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// floatList is a comma-separated list of positive numbers.
type floatList []float64

func (l *floatList) String() string {
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (l *floatList) Set(s string) error {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("%q is not a positive number", p)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := bench.DefaultConfig()
	fs := flag.NewFlagSet("omniroute-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: omniroute-bench [flags] [scenario or group...]\n\nScenarios (default: every available one marked *; group \"gates\" selects issue 11's gate scenarios):\n")
		for _, s := range bench.Scenarios() {
			state := ""
			if s.Unavailable != "" {
				state = " [not available in this build: " + s.Unavailable + "]"
			}
			mark := " "
			if s.Default {
				mark = "*"
			}
			fmt.Fprintf(stderr, " %s%-24s %s%s\n", mark, s.Name, firstSentence(s.Description), state)
		}
		fmt.Fprintf(stderr, "\nFlags:\n")
		fs.PrintDefaults()
	}
	defaultOut := cfg.Out
	fs.StringVar(&cfg.Out, "out", "", "output directory for report.json, report.md, report.html and logs/ (default ./bench-results/<UTC timestamp>/)")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "interleaved rounds (a valid run needs at least 3)")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured warm-up before every cell, same load")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured sending window of every cell")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "wait after start-up before idle memory is read")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the open-loop arrival times")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "client timeout of one non-streaming request")
	fs.DurationVar(&cfg.StreamTimeout, "stream-timeout", cfg.StreamTimeout, "client timeout of one stream")
	fs.Float64Var(&cfg.NoiseLimit, "noise-limit", cfg.NoiseLimit, "largest allowed round-to-round spread (max/min-1) of the reference proxy's closed-loop throughput")
	fs.BoolVar(&cfg.AllowNoisy, "allow-noisy", false, "exit 0 even when the run is marked invalid for noise or too few rounds (the report still says so)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "passthrough: closed-loop concurrency")
	rates := floatList(cfg.Rates)
	fs.Var(&rates, "rates", "passthrough: open-loop rates in req/s, comma-separated")
	fs.IntVar(&cfg.Streams, "streams", cfg.Streams, "streaming: concurrent streams")
	fs.IntVar(&cfg.StreamLatencyMS, "stream-latency-ms", cfg.StreamLatencyMS, "streaming: mock time to first token")
	fs.IntVar(&cfg.StreamChunks, "stream-chunks", cfg.StreamChunks, "streaming: content chunks per stream")
	fs.IntVar(&cfg.StreamGapMS, "stream-gap-ms", cfg.StreamGapMS, "streaming: gap between chunks")
	fs.Float64Var(&cfg.OverloadFactor, "overload-factor", cfg.OverloadFactor, "overload: offered rate as a multiple of the gateway's measured capacity")
	fs.IntVar(&cfg.OverloadLatencyMS, "overload-latency-ms", cfg.OverloadLatencyMS, "overload: mock service time behind its fixed slots (slots = capacity × this)")
	fs.IntVar(&cfg.OverloadWorkers, "overload-workers", cfg.OverloadWorkers, "overload: most requests in flight from the generator")
	fs.Float64Var(&cfg.OverloadCapacity, "overload-capacity", 0, "overload: capacity in req/s to derive the rates and slots from, instead of the measured one (0: measured)")
	fs.IntVar(&cfg.FanoutConcurrency, "fanout-concurrency", cfg.FanoutConcurrency, "fanout: closed-loop concurrency")
	fs.Float64Var(&cfg.MaxRate, "max-rate", 0, "cap on every open-loop rate in req/s (0: none)")
	fs.BoolVar(&cfg.LanesFull, "lanes-full", cfg.LanesFull, "noisy-neighbour, interactive-batch, fanout-lanes and the gate scenarios (group \"gates\"): the full-length runs (about 75 s for the three, 18 minutes for the gates); false runs their few-second smoke variants")
	fs.Float64Var(&cfg.LanesScale, "lanes-scale", cfg.LanesScale, "the bench/lanes scenarios: multiplier of the offered rates and the mock's slots")
	fs.IntVar(&cfg.LargeBodyUploads, "largebody-uploads", cfg.LargeBodyUploads, "largebody: concurrent uploads")
	fs.IntVar(&cfg.LargeBodyMiB, "largebody-mib", cfg.LargeBodyMiB, "largebody: size of each upload in MiB")
	fs.StringVar(&cfg.LargeBodyMemLimit, "largebody-memlimit", cfg.LargeBodyMemLimit, "largebody: the gateway's GOMEMLIMIT (it sets the ingest byte budget)")
	fs.BoolVar(&cfg.CPUProfile, "cpuprofile", false, "build the gateway with the benchpprof tag and save a CPU profile (and its top functions) of each variant during the first closed-loop passthrough cell")
	variants := fs.String("variants", "", "comma-separated gateway variants to run instead of admission-off,admission-on (also: request-log-off, admission-off without the request log)")
	scaling := fs.Bool("gomaxprocs-scaling", true, "include the gomaxprocs scenario (GOMAXPROCS=1 vs 2) in a default run")
	quiet := fs.Bool("quiet", false, "no progress lines")
	list := fs.Bool("list", false, "list the scenarios and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *list {
		for _, s := range bench.Scenarios() {
			state := "available"
			if s.Unavailable != "" {
				state = "not available in this build: " + s.Unavailable
			}
			fmt.Fprintf(stdout, "%s (%s)\n    %s\n", s.Name, state, s.Description)
		}
		return 0
	}
	cfg.Rates = rates
	if *variants != "" {
		vs, err := bench.VariantsNamed(strings.Split(*variants, ","))
		if err != nil {
			fmt.Fprintf(stderr, "omniroute-bench: --variants: %v\n", err)
			return 2
		}
		cfg.Variants = vs
	}
	if cfg.Out == "" {
		cfg.Out = defaultOut
	}
	cfg.Scenarios = fs.Args()
	if len(cfg.Scenarios) == 0 && !*scaling {
		for _, s := range bench.Scenarios() {
			if s.Default && s.Unavailable == "" && s.Name != "gomaxprocs" {
				cfg.Scenarios = append(cfg.Scenarios, s.Name)
			}
		}
	}
	if !*quiet {
		cfg.Log = stderr
	}
	cfg.Command = "omniroute-bench " + strings.Join(args, " ")

	t0 := time.Now()
	rep, err := bench.Run(ctx, cfg)
	if rep == nil {
		fmt.Fprintf(stderr, "omniroute-bench: %v\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "omniroute-bench: %v\n", err)
		return 1
	}
	pass, fail, na := 0, 0, 0
	for _, c := range rep.Checks() {
		switch c.Status {
		case "pass":
			pass++
		case "fail":
			fail++
		default:
			na++
		}
	}
	fmt.Fprintf(stdout, "omniroute-bench: %d goals pass, %d fail, %d n/a in %s; report in %s/report.{md,html,json}\n",
		pass, fail, na, time.Since(t0).Round(time.Second), cfg.Out)
	if rep.Valid {
		return 0
	}
	fmt.Fprintf(stderr, "omniroute-bench: run INVALID: %s\n", strings.Join(rep.Invalid, "; "))
	for _, s := range rep.Scenarios {
		if s.Status != "ok" {
			return 1
		}
	}
	if ctx.Err() != nil {
		return 1
	}
	if cfg.AllowNoisy {
		fmt.Fprintln(stderr, "omniroute-bench: reported anyway (--allow-noisy)")
		return 0
	}
	return 1
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
