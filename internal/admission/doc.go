// Package admission is the pure, deterministic core of the gateway's
// adaptive admission: the validated controller configuration, request cost
// from request features, the per-window adaptation rule, the fair cost
// scheduler that shares freed capacity among tenant lanes, and the gate that
// admits, queues or refuses work in one locked check.
//
// Goals, in order:
//
//  1. Never let admitted in-flight cost exceed the limit in effect (the only
//     exception is solo progress: one oversized request on an idle system).
//  2. Never let a new arrival bypass work already waiting in its class.
//  3. Share capacity among tenants by cost, max-min fairly, with memory of
//     past grants (start-time fair queuing with decayed virtual-time leads),
//     and between the interactive and batch classes with protected floors
//     and borrowing but no preemption.
//  4. Track upstream capacity with one controller per gateway, fed by the
//     latency signal that means congestion for LLM traffic: time to first
//     token for streams, whole-answer latency otherwise; upstream 429s, 5xx
//     and timeouts are drops; fast failures and probes are not samples.
//
// Non-goals: no goroutines, no timers and no wall clock here. Every function
// takes the time it should act at, so the actors in actors/lanes drive it in
// production and tests drive it with a fake clock.
//
// The behaviour follows OmniRoute's adaptive admission (config names,
// defaults, validation messages, the update rule) except where OmniRoute is
// wrong; each such place says so.
package admission
