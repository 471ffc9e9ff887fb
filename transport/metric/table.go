// Package metric is the one table of the gateway's metric families: each
// family's name (the one place it is written: TestNoMetricNameOutsideTable),
// type, labels and help, from which /metrics takes its # HELP and # TYPE
// lines (WriteExposition) and docs/metrics.md is rendered
// (TestMetricTableDocs in package transport). A package of its own so that
// the pipeline's stage packages (transport/intake, transport/admit) name the
// families they register from the same table as transport does.
package metric

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// Kind is a metric family's Prometheus type.
type Kind uint8

const (
	Counter Kind = iota
	Gauge
	Histogram
)

func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Histogram:
		return "histogram"
	}
	return "gauge"
}

// Def describes one metric family of the gateway.
type Def struct {
	Name   string
	Kind   Kind
	Labels string // the labels, as documented ("" for none)
	Help   string // one line: the HELP text and the docs' meaning column
}

// The metric families' names: the one place each is written. Code that
// registers a series names its family by these constants (TestNoMetricNameOutsideTable).
const (
	RequestsTotal                      = "omniroute_requests_total"
	RequestDurationSeconds             = "omniroute_request_duration_seconds"
	RequestsInflight                   = "omniroute_requests_inflight"
	UpstreamAttemptsTotal              = "omniroute_upstream_attempts_total"
	UpstreamResponsesTotal             = "omniroute_upstream_responses_total"
	UpstreamTtfbSeconds                = "omniroute_upstream_ttfb_seconds"
	FallbacksTotal                     = "omniroute_fallbacks_total"
	StreamEventsTotal                  = "omniroute_stream_events_total"
	StreamInterruptedTotal             = "omniroute_stream_interrupted_total"
	RoutingWaitsTotal                  = "omniroute_routing_waits_total"
	RoutingWaiting                     = "omniroute_routing_waiting"
	RoutingRetriesTotal                = "omniroute_routing_retries_total"
	RequestPanicsTotal                 = "omniroute_request_panics_total"
	ConfigReloadsTotal                 = "omniroute_config_reloads_total"
	ConfigLoadedTimestampSeconds       = "omniroute_config_loaded_timestamp_seconds"
	ConfigVersion                      = "omniroute_config_version"
	ServiceState                       = "omniroute_service_state"
	ServiceHealth                      = "omniroute_service_health"
	ServiceRestartsTotal               = "omniroute_service_restarts_total"
	ServiceCrashes                     = "omniroute_service_crashes"
	ServiceGaveUp                      = "omniroute_service_gave_up"
	ServiceLogBytes                    = "omniroute_service_log_bytes"
	RelayRequestsTotal                 = "omniroute_relay_requests_total"
	RelayFallbacksTotal                = "omniroute_relay_fallbacks_total"
	RelayBifrostFailuresTotal          = "omniroute_relay_bifrost_failures_total"
	RelayRejectedTotal                 = "omniroute_relay_rejected_total"
	RelayBifrostCooldownSeconds        = "omniroute_relay_bifrost_cooldown_seconds"
	ChatAdmissionInflightBytes         = "omniroute_chat_admission_inflight_bytes"
	ChatAdmissionMaxInflightBytes      = "omniroute_chat_admission_max_inflight_bytes"
	ChatAdmissionBudgetInfo            = "omniroute_chat_admission_budget_info"
	ChatAdmissionActiveHeavy           = "omniroute_chat_admission_active_heavy"
	ChatAdmissionActiveHealthyHeadroom = "omniroute_chat_admission_active_healthy_headroom"
	ChatAdmissionCountCap              = "omniroute_chat_admission_count_cap"
	ChatAdmissionWaiting               = "omniroute_chat_admission_waiting"
	ChatAdmissionQueuedBytes           = "omniroute_chat_admission_queued_bytes"
	ChatAdmissionLanes                 = "omniroute_chat_admission_lanes"
	ChatAdmissionQueuedRequestsTotal   = "omniroute_chat_admission_queued_requests_total"
	ChatAdmissionShedsTotal            = "omniroute_chat_admission_sheds_total"
	ResourcePressureSeverity           = "omniroute_resource_pressure_severity"
	ResourcePressureReason             = "omniroute_resource_pressure_reason"
	QuotaModels                        = "omniroute_quota_models"
	QuotaPollsTotal                    = "omniroute_quota_polls_total"
	CircuitState                       = "omniroute_circuit_state"
	TargetCooldownSeconds              = "omniroute_target_cooldown_seconds"
	RoutingSkipsTotal                  = "omniroute_routing_skips_total"
	LedgerReservedTokens               = "omniroute_ledger_reserved_tokens"
	AdmissionLimit                     = "omniroute_admission_limit"
	AdmissionMinLimit                  = "omniroute_admission_min_limit"
	AdmissionMaxLimit                  = "omniroute_admission_max_limit"
	AdmissionGlobalLimit               = "omniroute_admission_global_limit"
	AdmissionGlobalActiveCost          = "omniroute_admission_global_active_cost"
	AdmissionActiveCost                = "omniroute_admission_active_cost"
	AdmissionActiveRequests            = "omniroute_admission_active_requests"
	AdmissionQueuedCost                = "omniroute_admission_queued_cost"
	AdmissionQueuedRequests            = "omniroute_admission_queued_requests"
	AdmissionLanes                     = "omniroute_admission_lanes"
	AdmissionVirtualLanesEnabled       = "omniroute_admission_virtual_lanes_enabled"
	AdmissionVirtualActiveCost         = "omniroute_admission_virtual_active_cost"
	AdmissionVirtualActiveRequests     = "omniroute_admission_virtual_active_requests"
	AdmissionVirtualQueuedCost         = "omniroute_admission_virtual_queued_cost"
	AdmissionVirtualQueuedRequests     = "omniroute_admission_virtual_queued_requests"
	AdmissionAdmittedTotal             = "omniroute_admission_admitted_total"
	AdmissionRejectedTotal             = "omniroute_admission_rejected_total"
	AdmissionAbortedTotal              = "omniroute_admission_aborted_total"
	AdmissionBusyTotal                 = "omniroute_admission_busy_total"
	AdmissionWouldAdmitTotal           = "omniroute_admission_would_admit_total"
	AdmissionWouldQueueTotal           = "omniroute_admission_would_queue_total"
	AdmissionWouldRejectTotal          = "omniroute_admission_would_reject_total"
	AdmissionMode                      = "omniroute_admission_mode"
	AdmissionShutdown                  = "omniroute_admission_shutdown"
	AdmissionClassActiveCost           = "omniroute_admission_class_active_cost"
	AdmissionClassActiveRequests       = "omniroute_admission_class_active_requests"
	AdmissionClassWaitingRequests      = "omniroute_admission_class_waiting_requests"
	AdmissionClassAdmittedTotal        = "omniroute_admission_class_admitted_total"
	AdmissionClassRejectedTotal        = "omniroute_admission_class_rejected_total"
	AdmissionUpstreamLimit             = "omniroute_admission_upstream_limit"
	AdmissionUpstreamKneeEstimate      = "omniroute_admission_upstream_knee_estimate"
	AdmissionUpstreamActiveCost        = "omniroute_admission_upstream_active_cost"
	AdmissionUpstreamActiveRequests    = "omniroute_admission_upstream_active_requests"
	AdmissionUpstreamQueuedRequests    = "omniroute_admission_upstream_queued_requests"
	AdmissionUpstreamBaselineSeconds   = "omniroute_admission_upstream_baseline_seconds"
	AdmissionUpstreamDrainPerSecond    = "omniroute_admission_upstream_drain_per_second"
)

// Table is the one list of the gateway's metric families. /metrics
// takes each family's # HELP and # TYPE from it (WriteExposition), and
// docs/metrics.md holds its rendering (TestMetricTableDocs), so a family
// cannot be exposed without its help text or documented without existing:
// TestMetricsPromtool fails on any omniroute_ family missing here.
//
// Some series are registered as VictoriaMetrics gauges whose callback
// reads a monotonic count from an actor's snapshot; their kind here is
// counter, which is what they are.
var Table = []Def{
	// Requests.
	{RequestsTotal, Counter, "`route`, `status`", "Finished requests by route (chat, messages, responses, embeddings, models (with /v1/models/{id}), count_tokens, health (with /healthz and /readyz), metrics, management (with the dashboard), relay, root (GET and HEAD /), other) and HTTP status; a caller that left before the answer counts as status 499."},
	{RequestDurationSeconds, Histogram, "`route`", "Time from request start to the end of the response (for streams: to the end of the stream)."},
	{RequestsInflight, Gauge, "", "Requests being handled, streams included."},
	{UpstreamAttemptsTotal, Counter, "`target`, `outcome`", "Upstream attempts by target (provider/connection/model) and outcome: ok, connect, timeout, rate_limit, quota, capacity, auth, request, protocol, canceled."},
	{UpstreamResponsesTotal, Counter, "`target`, `status`", "HTTP statuses providers answered with, by target."},
	{UpstreamTtfbSeconds, Histogram, "`target`", "Time to response headers of successful upstream attempts (token counts excluded: they are no sample of a model call)."},
	{FallbacksTotal, Counter, "`route`", "Failed upstream attempts before the one that answered."},
	{StreamEventsTotal, Counter, "`route`", "SSE events relayed to callers."},
	{StreamInterruptedTotal, Counter, "`route`", "Streams ended by an upstream failure after the first byte (an in-band error was sent)."},
	{RoutingWaiting, Gauge, "", "Requests waiting now for one of their model's targets to recover (every target out, the earliest recovery within the wait budget)."},
	{RoutingWaitsTotal, Counter, "`route`, `outcome`", "Requests that found every target out: recovered (waited, then routed) or refused (429 targets_exhausted, or 503 targets_unavailable when every target failed)."},
	{RoutingRetriesTotal, Counter, "`route`", "Requests whose only target was retried once (as its circuit's probe) after a transient failure."},
	{RequestPanicsTotal, Counter, "`route`", "Requests whose handling panicked (answered 500 internal_error, or a stream cut off); the gateway keeps serving."},

	// Config reload (reload.go).
	{ConfigReloadsTotal, Counter, "`result`", "Config reloads (SIGHUP, POST /api/config/reload) by result: ok (in force), invalid (the file does not validate), needs_restart (an earlier reload failed while registering new targets: only a restart loads a config now), unreadable (no file, or it cannot be read); the running config stays on all but ok."},
	{ConfigLoadedTimestampSeconds, Gauge, "", "Unix time the config in force was loaded (start-up or the last applied reload)."},
	{ConfigVersion, Gauge, "", "Version of the config in force: 1 at start-up, one more per applied reload."},

	// Supervised services and the relay.
	{ServiceState, Gauge, "`service`, `state`", "1 for the service's current state (not_installed, stopped, starting, running, stopping, error), 0 for the others."},
	{ServiceHealth, Gauge, "`service`, `health`", "1 for the service's current health (healthy, unhealthy, unknown), 0 for the others."},
	{ServiceRestartsTotal, Counter, "`service`", "Automatic restarts of the service since the gateway started."},
	{ServiceCrashes, Gauge, "`service`", "Crashes of the service inside the current crash window."},
	{ServiceGaveUp, Gauge, "`service`", "1 while the supervisor has given up restarting the service (cleared by an explicit start)."},
	{ServiceLogBytes, Gauge, "`service`", "Bytes held by the service's log ring."},
	{RelayRequestsTotal, Counter, "`backend`", "Relay requests sent to bifrost or served by native."},
	{RelayFallbacksTotal, Counter, "`reason`", "Relay requests that fell back to native: bifrost-cooldown, bifrost-error, bifrost-ineligible, bifrost-provider-unknown."},
	{RelayBifrostFailuresTotal, Counter, "", "Relay failures of Bifrost (connect, timeout, 5xx without a provider error body, stream broken before its first content event)."},
	{RelayRejectedTotal, Counter, "`reason`", "Relay requests refused: missing_token, invalid_token, expired_token, rate_limited, model_not_allowed."},
	{RelayBifrostCooldownSeconds, Gauge, "", "Time left on the cooldown of the current Bifrost endpoint."},

	// Ingest byte budget (chatAdmission) and memory pressure.
	{ChatAdmissionInflightBytes, Gauge, "", "Request-body bytes reserved from the ingest budget now."},
	{ChatAdmissionMaxInflightBytes, Gauge, "", "The ingest byte budget."},
	{ChatAdmissionBudgetInfo, Gauge, "`source`", "Always 1; source is where the ingest budget came from: go_memlimit, cgroup, physical, override."},
	{ChatAdmissionActiveHeavy, Gauge, "", "Heavy requests in flight (a reservation's count slot, held until the request ends)."},
	{ChatAdmissionActiveHealthyHeadroom, Gauge, "", "Heavy requests admitted through the healthy headroom."},
	{ChatAdmissionCountCap, Gauge, "", "OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT, 0 when no count cap is set."},
	{ChatAdmissionWaiting, Gauge, "", "Requests queued for ingest admission."},
	{ChatAdmissionQueuedBytes, Gauge, "", "Bytes the queued requests wait for."},
	{ChatAdmissionLanes, Gauge, "", "Callers with requests queued for ingest admission (callers are not labels: keys are unbounded)."},
	{ChatAdmissionQueuedRequestsTotal, Counter, "", "Reservations that went through the queue instead of the lock-free fast path."},
	{ChatAdmissionShedsTotal, Counter, "`reason` (and a total without it)", "Requests refused by ingest admission: queue_timeout, queued_bytes_budget, body_exceeds_budget, inflight_bytes_budget, resource_pressure; clients that left while queued are not counted."},
	{ResourcePressureSeverity, Gauge, "", "Memory pressure: 0 normal, 1 high, 2 critical."},
	{ResourcePressureReason, Gauge, "`reason`", "1 for the signal behind the current pressure severity (none, go_heap_ratio, cgroup_ratio, cgroup_high, psi_some, psi_full, oom_event), else 0."},

	// Quota, cooldowns, circuits, ledger.
	{QuotaModels, Gauge, "`connection`, `state`", "Models served through the connection in each quota state (healthy, approaching_limit, exhausted, unavailable, unknown)."},
	{QuotaPollsTotal, Counter, "`connection`, `outcome`", "Usage-API polls of the connection (ok, error)."},
	{CircuitState, Gauge, "`target`, `state`", "1 for the target's current circuit state (closed, open, half_open), else 0."},
	{TargetCooldownSeconds, Gauge, "`target`", "Seconds until the target may be tried again (0 when not cooling)."},
	{RoutingSkipsTotal, Counter, "`target`, `reason`", "Requests that skipped the target: cooling, circuit_open, quota_exhausted, token_budget, service_unavailable (its supervised service is not running as the gateway's own child)."},
	{LedgerReservedTokens, Gauge, "", "Tokens held or used in the ledger's token windows (each budget's tightest), all budgets together."},

	// Adaptive admission (adaptiveAdmission).
	{AdmissionLimit, Gauge, "", "Sum of the upstreams' admission limits (cost units)."},
	{AdmissionMinLimit, Gauge, "", "Lowest admission limit of each upstream (ADAPTIVE_ADMISSION_MIN_LIMIT)."},
	{AdmissionMaxLimit, Gauge, "", "Highest admission limit of each upstream (ADAPTIVE_ADMISSION_MAX_LIMIT)."},
	{AdmissionGlobalLimit, Gauge, "", "Process-wide bound on in-flight cost (ADAPTIVE_ADMISSION_GLOBAL_LIMIT)."},
	{AdmissionGlobalActiveCost, Gauge, "", "Cost held under the process-wide bound."},
	{AdmissionActiveCost, Gauge, "", "Cost of the held admission leases over all upstreams."},
	{AdmissionActiveRequests, Gauge, "", "Held admission leases over all upstreams."},
	{AdmissionQueuedCost, Gauge, "", "Cost waiting for admission over all upstreams."},
	{AdmissionQueuedRequests, Gauge, "", "Requests waiting for admission over all upstreams."},
	{AdmissionLanes, Gauge, "", "Tenant lanes."},
	{AdmissionVirtualLanesEnabled, Gauge, "", "1 with OMNIROUTE_CHAT_VIRTUAL_LANES."},
	{AdmissionVirtualActiveCost, Gauge, "", "Shadow mode: cost enforce would hold."},
	{AdmissionVirtualActiveRequests, Gauge, "", "Shadow mode: leases enforce would hold."},
	{AdmissionVirtualQueuedCost, Gauge, "", "Shadow mode: cost enforce would queue."},
	{AdmissionVirtualQueuedRequests, Gauge, "", "Shadow mode: requests enforce would queue."},
	{AdmissionAdmittedTotal, Counter, "", "Admission grants."},
	{AdmissionRejectedTotal, Counter, "", "Admission rejections."},
	{AdmissionAbortedTotal, Counter, "", "Callers that left while waiting for admission."},
	{AdmissionBusyTotal, Counter, "", "Try-acquires that found no room (a target skipped for another)."},
	{AdmissionWouldAdmitTotal, Counter, "", "Shadow mode: requests enforce would have admitted at once."},
	{AdmissionWouldQueueTotal, Counter, "", "Shadow mode: requests enforce would have queued."},
	{AdmissionWouldRejectTotal, Counter, "", "Shadow mode: requests enforce would have rejected."},
	{AdmissionMode, Gauge, "`mode`", "1 for the configured admission mode (off, shadow, enforce)."},
	{AdmissionShutdown, Gauge, "", "1 after admission stopped."},
	{AdmissionClassActiveCost, Gauge, "`class`", "Cost held by the priority class."},
	{AdmissionClassActiveRequests, Gauge, "`class`", "Leases held by the priority class."},
	{AdmissionClassWaitingRequests, Gauge, "`class`", "Requests of the priority class waiting for admission."},
	{AdmissionClassAdmittedTotal, Counter, "`class`", "Admission grants of the priority class."},
	{AdmissionClassRejectedTotal, Counter, "`class`, `reason`", "Admission rejections by priority class and error code."},
	{AdmissionUpstreamLimit, Gauge, "`upstream`", "The upstream's admission limit (cost units)."},
	{AdmissionUpstreamKneeEstimate, Gauge, "`upstream`", "The upstream controller's estimate of the provider's knee (cost units)."},
	{AdmissionUpstreamActiveCost, Gauge, "`upstream`", "Cost held on the upstream."},
	{AdmissionUpstreamActiveRequests, Gauge, "`upstream`", "Leases held on the upstream."},
	{AdmissionUpstreamQueuedRequests, Gauge, "`upstream`", "Requests waiting for the upstream."},
	{AdmissionUpstreamBaselineSeconds, Gauge, "`upstream`, `kind` (`stream`, `plain`)", "The upstream's no-queue latency (a stream's is its time to first token)."},
	{AdmissionUpstreamDrainPerSecond, Gauge, "`upstream`", "The upstream's measured drain rate (cost per second) the shedding decisions use."},
}

// DurationBuckets are the le bounds of the duration histograms: model
// calls run from milliseconds (a refusal) to minutes (a long stream).
var DurationBuckets = DurationBounds[:]

// DurationBounds are DurationBuckets as an array, for counters kept per
// bucket in a fixed array (the dashboard's).
var DurationBounds = [...]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900}

// Index finds a family of Table by its name.
var Index = func() map[string]*Def {
	m := make(map[string]*Def, len(Table))
	for i := range Table {
		m[Table[i].Name] = &Table[i]
	}
	return m
}()

// runtimeRenames are the VictoriaMetrics runtime families whose names
// break Prometheus' naming rules (a _count suffix outside a histogram or
// summary); /metrics serves them under these names instead.
var runtimeRenames = map[string]string{
	"go_cgo_calls_count": "go_cgo_calls_total",
	"go_gc_forced_count": "go_gc_forced_total",
	"go_cpu_count":       "go_cpus",
}

// WriteExposition copies VictoriaMetrics' text output (written with
// ExposeMetadata on, so every family has its # HELP and # TYPE lines) to
// w, filling in the help text and the type from Table. Families not
// in the table (the go_* and process_* figures) keep their type and get a
// help line naming where they come from, with runtimeRenames applied and a
// _total family typed as the counter it is.
func WriteExposition(w io.Writer, src []byte) {
	bw := bufio.NewWriterSize(w, 32<<10)
	for len(src) > 0 {
		line := src
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			line, src = src[:i+1], src[i+1:]
		} else {
			src = nil
		}
		switch {
		case bytes.HasPrefix(line, []byte("# HELP ")):
			fam := strings.TrimSpace(string(line[len("# HELP "):]))
			if f := strings.IndexByte(fam, ' '); f >= 0 {
				fam = fam[:f]
			}
			if to, ok := runtimeRenames[fam]; ok {
				fam = to
			}
			bw.WriteString("# HELP " + fam + " " + Help(fam) + "\n")
		case bytes.HasPrefix(line, []byte("# TYPE ")):
			fields := strings.Fields(string(line[len("# TYPE "):]))
			if len(fields) == 2 {
				if to, ok := runtimeRenames[fields[0]]; ok {
					fields[0] = to
				}
				if d := Index[fields[0]]; d != nil {
					fields[1] = d.Kind.String()
				} else if strings.HasSuffix(fields[0], "_total") {
					fields[1] = "counter"
				}
				bw.WriteString("# TYPE " + fields[0] + " " + fields[1] + "\n")
				continue
			}
			bw.Write(line)
		default:
			if line[0] == 'g' {
				if old, to, ok := renamedSample(line); ok {
					bw.WriteString(to)
					line = line[len(old):]
				}
			}
			bw.Write(line)
		}
	}
	bw.Flush()
}

// renamedSample reports whether a sample line belongs to a renamed family.
func renamedSample(line []byte) (old, to string, ok bool) {
	for old, to := range runtimeRenames {
		if len(line) > len(old) && string(line[:len(old)]) == old && (line[len(old)] == ' ' || line[len(old)] == '{') {
			return old, to, true
		}
	}
	return "", "", false
}

// Help is a family's help text: the table's, else one naming where an
// untabled family (the go_* and process_* figures) comes from.
func Help(fam string) string {
	if d := Index[fam]; d != nil {
		return d.Help
	}
	switch {
	case strings.HasPrefix(fam, "go_"):
		return "Go runtime figure " + fam + " (VictoriaMetrics/metrics; see https://pkg.go.dev/runtime/metrics)."
	case strings.HasPrefix(fam, "process_"):
		return "Process figure " + fam + " of the gateway (VictoriaMetrics/metrics, read from /proc)."
	}
	return "Metric " + fam + " (not in the gateway's metric table)."
}
