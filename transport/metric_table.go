package transport

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// metricKind is a metric family's Prometheus type.
type metricKind uint8

const (
	kindCounter metricKind = iota
	kindGauge
	kindHistogram
)

func (k metricKind) String() string {
	switch k {
	case kindCounter:
		return "counter"
	case kindHistogram:
		return "histogram"
	}
	return "gauge"
}

// metricDef describes one metric family of the gateway.
type metricDef struct {
	name   string
	kind   metricKind
	labels string // the labels, as documented ("" for none)
	help   string // one line: the HELP text and the docs' meaning column
}

// The metric families' names: the one place each is written. Code that
// registers a series names its family by these constants (TestNoMetricNameOutsideTable).
const (
	metricRequestsTotal                      = "omniroute_requests_total"
	metricRequestDurationSeconds             = "omniroute_request_duration_seconds"
	metricRequestsInflight                   = "omniroute_requests_inflight"
	metricUpstreamAttemptsTotal              = "omniroute_upstream_attempts_total"
	metricUpstreamResponsesTotal             = "omniroute_upstream_responses_total"
	metricUpstreamTtfbSeconds                = "omniroute_upstream_ttfb_seconds"
	metricFallbacksTotal                     = "omniroute_fallbacks_total"
	metricStreamEventsTotal                  = "omniroute_stream_events_total"
	metricStreamInterruptedTotal             = "omniroute_stream_interrupted_total"
	metricRoutingWaitsTotal                  = "omniroute_routing_waits_total"
	metricRoutingWaiting                     = "omniroute_routing_waiting"
	metricRoutingRetriesTotal                = "omniroute_routing_retries_total"
	metricRequestPanicsTotal                 = "omniroute_request_panics_total"
	metricConfigReloadsTotal                 = "omniroute_config_reloads_total"
	metricConfigLoadedTimestampSeconds       = "omniroute_config_loaded_timestamp_seconds"
	metricConfigVersion                      = "omniroute_config_version"
	metricServiceState                       = "omniroute_service_state"
	metricServiceHealth                      = "omniroute_service_health"
	metricServiceRestartsTotal               = "omniroute_service_restarts_total"
	metricServiceCrashes                     = "omniroute_service_crashes"
	metricServiceGaveUp                      = "omniroute_service_gave_up"
	metricServiceLogBytes                    = "omniroute_service_log_bytes"
	metricRelayRequestsTotal                 = "omniroute_relay_requests_total"
	metricRelayFallbacksTotal                = "omniroute_relay_fallbacks_total"
	metricRelayBifrostFailuresTotal          = "omniroute_relay_bifrost_failures_total"
	metricRelayRejectedTotal                 = "omniroute_relay_rejected_total"
	metricRelayBifrostCooldownSeconds        = "omniroute_relay_bifrost_cooldown_seconds"
	metricChatAdmissionInflightBytes         = "omniroute_chat_admission_inflight_bytes"
	metricChatAdmissionMaxInflightBytes      = "omniroute_chat_admission_max_inflight_bytes"
	metricChatAdmissionBudgetInfo            = "omniroute_chat_admission_budget_info"
	metricChatAdmissionActiveHeavy           = "omniroute_chat_admission_active_heavy"
	metricChatAdmissionActiveHealthyHeadroom = "omniroute_chat_admission_active_healthy_headroom"
	metricChatAdmissionCountCap              = "omniroute_chat_admission_count_cap"
	metricChatAdmissionWaiting               = "omniroute_chat_admission_waiting"
	metricChatAdmissionQueuedBytes           = "omniroute_chat_admission_queued_bytes"
	metricChatAdmissionLanes                 = "omniroute_chat_admission_lanes"
	metricChatAdmissionQueuedRequestsTotal   = "omniroute_chat_admission_queued_requests_total"
	metricChatAdmissionShedsTotal            = "omniroute_chat_admission_sheds_total"
	metricResourcePressureSeverity           = "omniroute_resource_pressure_severity"
	metricResourcePressureReason             = "omniroute_resource_pressure_reason"
	metricQuotaModels                        = "omniroute_quota_models"
	metricQuotaPollsTotal                    = "omniroute_quota_polls_total"
	metricCircuitState                       = "omniroute_circuit_state"
	metricTargetCooldownSeconds              = "omniroute_target_cooldown_seconds"
	metricRoutingSkipsTotal                  = "omniroute_routing_skips_total"
	metricLedgerReservedTokens               = "omniroute_ledger_reserved_tokens"
	metricAdmissionLimit                     = "omniroute_admission_limit"
	metricAdmissionMinLimit                  = "omniroute_admission_min_limit"
	metricAdmissionMaxLimit                  = "omniroute_admission_max_limit"
	metricAdmissionGlobalLimit               = "omniroute_admission_global_limit"
	metricAdmissionGlobalActiveCost          = "omniroute_admission_global_active_cost"
	metricAdmissionActiveCost                = "omniroute_admission_active_cost"
	metricAdmissionActiveRequests            = "omniroute_admission_active_requests"
	metricAdmissionQueuedCost                = "omniroute_admission_queued_cost"
	metricAdmissionQueuedRequests            = "omniroute_admission_queued_requests"
	metricAdmissionLanes                     = "omniroute_admission_lanes"
	metricAdmissionVirtualLanesEnabled       = "omniroute_admission_virtual_lanes_enabled"
	metricAdmissionVirtualActiveCost         = "omniroute_admission_virtual_active_cost"
	metricAdmissionVirtualActiveRequests     = "omniroute_admission_virtual_active_requests"
	metricAdmissionVirtualQueuedCost         = "omniroute_admission_virtual_queued_cost"
	metricAdmissionVirtualQueuedRequests     = "omniroute_admission_virtual_queued_requests"
	metricAdmissionAdmittedTotal             = "omniroute_admission_admitted_total"
	metricAdmissionRejectedTotal             = "omniroute_admission_rejected_total"
	metricAdmissionAbortedTotal              = "omniroute_admission_aborted_total"
	metricAdmissionBusyTotal                 = "omniroute_admission_busy_total"
	metricAdmissionWouldAdmitTotal           = "omniroute_admission_would_admit_total"
	metricAdmissionWouldQueueTotal           = "omniroute_admission_would_queue_total"
	metricAdmissionWouldRejectTotal          = "omniroute_admission_would_reject_total"
	metricAdmissionMode                      = "omniroute_admission_mode"
	metricAdmissionShutdown                  = "omniroute_admission_shutdown"
	metricAdmissionClassActiveCost           = "omniroute_admission_class_active_cost"
	metricAdmissionClassActiveRequests       = "omniroute_admission_class_active_requests"
	metricAdmissionClassWaitingRequests      = "omniroute_admission_class_waiting_requests"
	metricAdmissionClassAdmittedTotal        = "omniroute_admission_class_admitted_total"
	metricAdmissionClassRejectedTotal        = "omniroute_admission_class_rejected_total"
	metricAdmissionUpstreamLimit             = "omniroute_admission_upstream_limit"
	metricAdmissionUpstreamKneeEstimate      = "omniroute_admission_upstream_knee_estimate"
	metricAdmissionUpstreamActiveCost        = "omniroute_admission_upstream_active_cost"
	metricAdmissionUpstreamActiveRequests    = "omniroute_admission_upstream_active_requests"
	metricAdmissionUpstreamQueuedRequests    = "omniroute_admission_upstream_queued_requests"
	metricAdmissionUpstreamBaselineSeconds   = "omniroute_admission_upstream_baseline_seconds"
	metricAdmissionUpstreamDrainPerSecond    = "omniroute_admission_upstream_drain_per_second"
)

// metricTable is the one list of the gateway's metric families. /metrics
// takes each family's # HELP and # TYPE from it (writeExposition), and
// docs/metrics.md holds its rendering (TestMetricTableDocs), so a family
// cannot be exposed without its help text or documented without existing:
// TestMetricsPromtool fails on any omniroute_ family missing here.
//
// Some series are registered as VictoriaMetrics gauges whose callback
// reads a monotonic count from an actor's snapshot; their kind here is
// counter, which is what they are.
var metricTable = []metricDef{
	// Requests.
	{metricRequestsTotal, kindCounter, "`route`, `status`", "Finished requests by route (chat, messages, responses, embeddings, models (with /v1/models/{id}), count_tokens, health (with /healthz and /readyz), metrics, management (with the dashboard), relay, root (GET and HEAD /), other) and HTTP status; a caller that left before the answer counts as status 499."},
	{metricRequestDurationSeconds, kindHistogram, "`route`", "Time from request start to the end of the response (for streams: to the end of the stream)."},
	{metricRequestsInflight, kindGauge, "", "Requests being handled, streams included."},
	{metricUpstreamAttemptsTotal, kindCounter, "`target`, `outcome`", "Upstream attempts by target (provider/connection/model) and outcome: ok, connect, timeout, rate_limit, quota, capacity, auth, request, protocol, canceled."},
	{metricUpstreamResponsesTotal, kindCounter, "`target`, `status`", "HTTP statuses providers answered with, by target."},
	{metricUpstreamTtfbSeconds, kindHistogram, "`target`", "Time to response headers of successful upstream attempts (token counts excluded: they are no sample of a model call)."},
	{metricFallbacksTotal, kindCounter, "`route`", "Failed upstream attempts before the one that answered."},
	{metricStreamEventsTotal, kindCounter, "`route`", "SSE events relayed to callers."},
	{metricStreamInterruptedTotal, kindCounter, "`route`", "Streams ended by an upstream failure after the first byte (an in-band error was sent)."},
	{metricRoutingWaiting, kindGauge, "", "Requests waiting now for one of their model's targets to recover (every target out, the earliest recovery within the wait budget)."},
	{metricRoutingWaitsTotal, kindCounter, "`route`, `outcome`", "Requests that found every target out: recovered (waited, then routed) or refused (429 targets_exhausted, or 503 targets_unavailable when every target failed)."},
	{metricRoutingRetriesTotal, kindCounter, "`route`", "Requests whose only target was retried once (as its circuit's probe) after a transient failure."},
	{metricRequestPanicsTotal, kindCounter, "`route`", "Requests whose handling panicked (answered 500 internal_error, or a stream cut off); the gateway keeps serving."},

	// Config reload (reload.go).
	{metricConfigReloadsTotal, kindCounter, "`result`", "Config reloads (SIGHUP, POST /api/config/reload) by result: ok (in force), invalid (the file does not validate), needs_restart (an earlier reload failed while registering new targets: only a restart loads a config now), unreadable (no file, or it cannot be read); the running config stays on all but ok."},
	{metricConfigLoadedTimestampSeconds, kindGauge, "", "Unix time the config in force was loaded (start-up or the last applied reload)."},
	{metricConfigVersion, kindGauge, "", "Version of the config in force: 1 at start-up, one more per applied reload."},

	// Supervised services and the relay.
	{metricServiceState, kindGauge, "`service`, `state`", "1 for the service's current state (not_installed, stopped, starting, running, stopping, error), 0 for the others."},
	{metricServiceHealth, kindGauge, "`service`, `health`", "1 for the service's current health (healthy, unhealthy, unknown), 0 for the others."},
	{metricServiceRestartsTotal, kindCounter, "`service`", "Automatic restarts of the service since the gateway started."},
	{metricServiceCrashes, kindGauge, "`service`", "Crashes of the service inside the current crash window."},
	{metricServiceGaveUp, kindGauge, "`service`", "1 while the supervisor has given up restarting the service (cleared by an explicit start)."},
	{metricServiceLogBytes, kindGauge, "`service`", "Bytes held by the service's log ring."},
	{metricRelayRequestsTotal, kindCounter, "`backend`", "Relay requests sent to bifrost or served by native."},
	{metricRelayFallbacksTotal, kindCounter, "`reason`", "Relay requests that fell back to native: bifrost-cooldown, bifrost-error, bifrost-ineligible, bifrost-provider-unknown."},
	{metricRelayBifrostFailuresTotal, kindCounter, "", "Relay failures of Bifrost (connect, timeout, 5xx without a provider error body, stream broken before its first content event)."},
	{metricRelayRejectedTotal, kindCounter, "`reason`", "Relay requests refused: missing_token, invalid_token, expired_token, rate_limited, model_not_allowed."},
	{metricRelayBifrostCooldownSeconds, kindGauge, "", "Time left on the cooldown of the current Bifrost endpoint."},

	// Ingest byte budget (chatAdmission) and memory pressure.
	{metricChatAdmissionInflightBytes, kindGauge, "", "Request-body bytes reserved from the ingest budget now."},
	{metricChatAdmissionMaxInflightBytes, kindGauge, "", "The ingest byte budget."},
	{metricChatAdmissionBudgetInfo, kindGauge, "`source`", "Always 1; source is where the ingest budget came from: go_memlimit, cgroup, physical, override."},
	{metricChatAdmissionActiveHeavy, kindGauge, "", "Heavy requests in flight (a reservation's count slot, held until the request ends)."},
	{metricChatAdmissionActiveHealthyHeadroom, kindGauge, "", "Heavy requests admitted through the healthy headroom."},
	{metricChatAdmissionCountCap, kindGauge, "", "OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT, 0 when no count cap is set."},
	{metricChatAdmissionWaiting, kindGauge, "", "Requests queued for ingest admission."},
	{metricChatAdmissionQueuedBytes, kindGauge, "", "Bytes the queued requests wait for."},
	{metricChatAdmissionLanes, kindGauge, "", "Callers with requests queued for ingest admission (callers are not labels: keys are unbounded)."},
	{metricChatAdmissionQueuedRequestsTotal, kindCounter, "", "Reservations that went through the queue instead of the lock-free fast path."},
	{metricChatAdmissionShedsTotal, kindCounter, "`reason` (and a total without it)", "Requests refused by ingest admission: queue_timeout, queued_bytes_budget, body_exceeds_budget, inflight_bytes_budget, resource_pressure; clients that left while queued are not counted."},
	{metricResourcePressureSeverity, kindGauge, "", "Memory pressure: 0 normal, 1 high, 2 critical."},
	{metricResourcePressureReason, kindGauge, "`reason`", "1 for the signal behind the current pressure severity (none, go_heap_ratio, cgroup_ratio, cgroup_high, psi_some, psi_full, oom_event), else 0."},

	// Quota, cooldowns, circuits, ledger.
	{metricQuotaModels, kindGauge, "`connection`, `state`", "Models served through the connection in each quota state (healthy, approaching_limit, exhausted, unavailable, unknown)."},
	{metricQuotaPollsTotal, kindCounter, "`connection`, `outcome`", "Usage-API polls of the connection (ok, error)."},
	{metricCircuitState, kindGauge, "`target`, `state`", "1 for the target's current circuit state (closed, open, half_open), else 0."},
	{metricTargetCooldownSeconds, kindGauge, "`target`", "Seconds until the target may be tried again (0 when not cooling)."},
	{metricRoutingSkipsTotal, kindCounter, "`target`, `reason`", "Requests that skipped the target: cooling, circuit_open, quota_exhausted, token_budget, service_unavailable (its supervised service is not running as the gateway's own child)."},
	{metricLedgerReservedTokens, kindGauge, "", "Tokens held or used in the ledger's token windows (each budget's tightest), all budgets together."},

	// Adaptive admission (adaptiveAdmission).
	{metricAdmissionLimit, kindGauge, "", "Sum of the upstreams' admission limits (cost units)."},
	{metricAdmissionMinLimit, kindGauge, "", "Lowest admission limit of each upstream (ADAPTIVE_ADMISSION_MIN_LIMIT)."},
	{metricAdmissionMaxLimit, kindGauge, "", "Highest admission limit of each upstream (ADAPTIVE_ADMISSION_MAX_LIMIT)."},
	{metricAdmissionGlobalLimit, kindGauge, "", "Process-wide bound on in-flight cost (ADAPTIVE_ADMISSION_GLOBAL_LIMIT)."},
	{metricAdmissionGlobalActiveCost, kindGauge, "", "Cost held under the process-wide bound."},
	{metricAdmissionActiveCost, kindGauge, "", "Cost of the held admission leases over all upstreams."},
	{metricAdmissionActiveRequests, kindGauge, "", "Held admission leases over all upstreams."},
	{metricAdmissionQueuedCost, kindGauge, "", "Cost waiting for admission over all upstreams."},
	{metricAdmissionQueuedRequests, kindGauge, "", "Requests waiting for admission over all upstreams."},
	{metricAdmissionLanes, kindGauge, "", "Tenant lanes."},
	{metricAdmissionVirtualLanesEnabled, kindGauge, "", "1 with OMNIROUTE_CHAT_VIRTUAL_LANES."},
	{metricAdmissionVirtualActiveCost, kindGauge, "", "Shadow mode: cost enforce would hold."},
	{metricAdmissionVirtualActiveRequests, kindGauge, "", "Shadow mode: leases enforce would hold."},
	{metricAdmissionVirtualQueuedCost, kindGauge, "", "Shadow mode: cost enforce would queue."},
	{metricAdmissionVirtualQueuedRequests, kindGauge, "", "Shadow mode: requests enforce would queue."},
	{metricAdmissionAdmittedTotal, kindCounter, "", "Admission grants."},
	{metricAdmissionRejectedTotal, kindCounter, "", "Admission rejections."},
	{metricAdmissionAbortedTotal, kindCounter, "", "Callers that left while waiting for admission."},
	{metricAdmissionBusyTotal, kindCounter, "", "Try-acquires that found no room (a target skipped for another)."},
	{metricAdmissionWouldAdmitTotal, kindCounter, "", "Shadow mode: requests enforce would have admitted at once."},
	{metricAdmissionWouldQueueTotal, kindCounter, "", "Shadow mode: requests enforce would have queued."},
	{metricAdmissionWouldRejectTotal, kindCounter, "", "Shadow mode: requests enforce would have rejected."},
	{metricAdmissionMode, kindGauge, "`mode`", "1 for the configured admission mode (off, shadow, enforce)."},
	{metricAdmissionShutdown, kindGauge, "", "1 after admission stopped."},
	{metricAdmissionClassActiveCost, kindGauge, "`class`", "Cost held by the priority class."},
	{metricAdmissionClassActiveRequests, kindGauge, "`class`", "Leases held by the priority class."},
	{metricAdmissionClassWaitingRequests, kindGauge, "`class`", "Requests of the priority class waiting for admission."},
	{metricAdmissionClassAdmittedTotal, kindCounter, "`class`", "Admission grants of the priority class."},
	{metricAdmissionClassRejectedTotal, kindCounter, "`class`, `reason`", "Admission rejections by priority class and error code."},
	{metricAdmissionUpstreamLimit, kindGauge, "`upstream`", "The upstream's admission limit (cost units)."},
	{metricAdmissionUpstreamKneeEstimate, kindGauge, "`upstream`", "The upstream controller's estimate of the provider's knee (cost units)."},
	{metricAdmissionUpstreamActiveCost, kindGauge, "`upstream`", "Cost held on the upstream."},
	{metricAdmissionUpstreamActiveRequests, kindGauge, "`upstream`", "Leases held on the upstream."},
	{metricAdmissionUpstreamQueuedRequests, kindGauge, "`upstream`", "Requests waiting for the upstream."},
	{metricAdmissionUpstreamBaselineSeconds, kindGauge, "`upstream`, `kind` (`stream`, `plain`)", "The upstream's no-queue latency (a stream's is its time to first token)."},
	{metricAdmissionUpstreamDrainPerSecond, kindGauge, "`upstream`", "The upstream's measured drain rate (cost per second) the shedding decisions use."},
}

// durationBuckets are the le bounds of the duration histograms: model
// calls run from milliseconds (a refusal) to minutes (a long stream).
var durationBuckets = durationBounds[:]

var durationBounds = [...]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900}

var metricIndex = func() map[string]*metricDef {
	m := make(map[string]*metricDef, len(metricTable))
	for i := range metricTable {
		m[metricTable[i].name] = &metricTable[i]
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

// writeExposition copies VictoriaMetrics' text output (written with
// ExposeMetadata on, so every family has its # HELP and # TYPE lines) to
// w, filling in the help text and the type from metricTable. Families not
// in the table (the go_* and process_* figures) keep their type and get a
// help line naming where they come from, with runtimeRenames applied and a
// _total family typed as the counter it is.
func writeExposition(w io.Writer, src []byte) {
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
			bw.WriteString("# HELP " + fam + " " + helpOf(fam) + "\n")
		case bytes.HasPrefix(line, []byte("# TYPE ")):
			fields := strings.Fields(string(line[len("# TYPE "):]))
			if len(fields) == 2 {
				if to, ok := runtimeRenames[fields[0]]; ok {
					fields[0] = to
				}
				if d := metricIndex[fields[0]]; d != nil {
					fields[1] = d.kind.String()
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

func helpOf(fam string) string {
	if d := metricIndex[fam]; d != nil {
		return d.help
	}
	switch {
	case strings.HasPrefix(fam, "go_"):
		return "Go runtime figure " + fam + " (VictoriaMetrics/metrics; see https://pkg.go.dev/runtime/metrics)."
	case strings.HasPrefix(fam, "process_"):
		return "Process figure " + fam + " of the gateway (VictoriaMetrics/metrics, read from /proc)."
	}
	return "Metric " + fam + " (not in the gateway's metric table)."
}
