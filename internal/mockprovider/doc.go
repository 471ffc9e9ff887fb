// Package mockprovider is a controllable fake LLM provider: a real fasthttp
// server that speaks enough of the OpenAI Chat Completions, OpenAI Responses
// and Anthropic Messages wire formats for the official Go SDKs to parse its
// answers and streams. The gateway's tests, its load benchmark and its
// no-config demo mode all talk to it, so it has three jobs: be fast (the
// benchmark compares "gateway → mock" against "direct → mock", so the default
// non-streaming path renders pre-built byte templates and never touches
// encoding/json), be correct on the wire, and report ground truth about what
// it received and how each request ended.
//
// # Endpoints
//
//	POST /v1/chat/completions   OpenAI chat (JSON or SSE "data:" frames + [DONE])
//	POST /v1/responses          OpenAI Responses (JSON or typed "event:" frames)
//	POST /v1/messages           Anthropic Messages (JSON or typed "event:" frames)
//	GET  /v1/models             OpenAI-style model list
//
// The "/v1" prefix is optional. Usage is deterministic: prompt tokens P =
// ceil(request body bytes / 4), completion tokens C = Behavior.CompletionTokens
// or, when that is 0, the number of stream chunks. A body that is not a JSON
// object or lacks a string "model" gets a 400 in the endpoint's error format.
//
// # Behaviour model
//
// Every request is served according to a Behavior chosen by the request's
// "model": a per-model entry if one was configured, else the default. A
// Behavior sets the latency (time to the response, or to the first stream
// event), stream chunking and pacing, the reply text and token counts, a
// per-model concurrency cap (Slots, with "queue" or "reject" overflow), an
// injected failure (FailSpec: an error status, a hang, a TCP reset, an in-band
// stream error or a truncated stream, optionally only for the first N
// requests) and rate-limit headers in one real provider's style
// (RateLimitSpec: OpenAI, Groq, Azure, Anthropic, Together, Mistral), with
// remaining counts that go down per request inside a refilling window.
//
// # Admin API (JSON, under /_mock/)
//
//	GET  /_mock/health    {"service":"omniroute-mockprovider","status":"ok","pid":…,"instance":…}
//	GET  /_mock/stats     counters (total and per model) and the last 1000 request bodies' digests
//	GET  /_mock/behavior  the current default and per-model behaviours
//	POST /_mock/behavior  BehaviorUpdate: replace the default and/or per-model behaviours, now or after_ms later
//	GET  /_mock/requests  the request log (Options.RequestLog): arrival, service start, end, outcome, chosen headers
//	POST /_mock/reset     counters, body and request logs and behaviours back to the start-up state
//
// The instance id in /_mock/health is random and fixed for the process, so a
// supervisor can prove which process answers on a port.
//
// # Changes while requests run
//
// Benchmarks step a provider's capacity, latency or failure mode at a
// planned moment (BehaviorUpdate.AfterMS, Server.ScheduleBehavior). Slots are
// a FIFO pool resized in place, so the new capacity holds from the step on;
// a request otherwise keeps the behaviour it arrived with, except that a hung
// request is released (answered as a success) when the behaviour that hung
// it is replaced. schedule.go has the details. Counters carry time integrals
// of the in-flight and queued gauges (mean in flight over any interval), and
// the optional request log the per-request times.
//
// # Cancellation ground truth
//
// The gateway must prove that it abandons upstream requests when its own
// client leaves, and reads the "cancelled" counter to do so. fasthttp gives
// handlers no close notification, so while the mock waits (latency, hang,
// slot queue, stream pacing) it peeks at the socket every few milliseconds
// (recv with MSG_PEEK|MSG_DONTWAIT: 0 bytes means the peer closed) and counts
// a departed client exactly once. During streaming, write errors are a second
// signal. On platforms without the peek only write errors are seen.
//
// # Processes
//
// Main is the CLI (also reachable as "omniroute mockprovider"). RunIfChild and
// StartProcess let a test binary re-execute itself as the mock, which gives a
// real child process to supervise without building a separate binary.
package mockprovider
