package relayroute

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/upstream"
)

// Call is one relay request as the request pipeline holds it, once the
// pipeline has walked it through the relay route's entry (the token
// admitted, the body admitted by the ingest byte budget, read and
// scanned, the token's model scope checked: transport's relayWalk).
// Package transport implements it on its call; the relay only decides
// and words, and everything that touches the call's state (its body,
// stream, leases, tracking and settlement) stays behind this port.
type Call interface {
	Request
	Upstream
}

// Request is what the relay reads of the request and how it answers.
type Request interface {
	// Ctx is the caller's request and the answer being written.
	Ctx() *fasthttp.RequestCtx
	// Fail answers the caller with e in the route's error shape (and
	// records it as the pipeline records every refusal).
	Fail(e *apierror.Error)
	// Model and Stream are what the pipeline's one scan of the body read.
	Model() []byte
	Stream() bool
	// Catalog is the catalog of the routing config the request began on.
	Catalog() *catalog.Catalog
	// Native serves the request through the ordinary pipeline (the model
	// walk and dispatch, as /v1/chat/completions) and reports whether a
	// stream now owns the call.
	Native() bool
}

// Upstream is the pipeline's exchange with an upstream that is not one
// of the model's targets (Bifrost): the same request start, pass-through
// and stream relay as a target's attempt, without its failover.
type Upstream interface {
	// Send sends the caller's body, unchanged, as the pipeline starts
	// every upstream request (POST prefix + the chat path at host, the
	// caller's forwarded headers, the request id; x.Req may already hold
	// the sender's own headers), through client with the call's cancel
	// handle: from here the call is tracked, so a hang-up or a shutdown
	// cancels the exchange.
	Send(client *upstream.Client, x *upstream.Exchange, host, prefix string) error
	// Drop releases x and undoes Send's tracking, after a failure that
	// wrote nothing to the caller: the native pipeline may track the call
	// again.
	Drop(x *upstream.Exchange)
	// Hold reads a stream up to its first content event (the start-up
	// events held back, an error event held to be passed on), each read
	// given idle; it returns messages.OK, or the class of the read's
	// failure.
	Hold(x *upstream.Exchange, idle time.Duration) messages.FailureClass
	// Commit answers with the held stream and hands the rest to the
	// pipeline's relay loop, each read given idle; s names the source in
	// the headers and words the frame that ends the stream if it breaks.
	// The call is owned by the stream from here.
	Commit(x *upstream.Exchange, idle time.Duration, s Source)
	// Answer passes a whole answer through (an error's body and headers
	// redacted), with by's headers, and releases x.
	Answer(x *upstream.Exchange, by Routed)
}

// Routed names an answer's source in the caller's headers, in place of
// the pipeline's target headers.
type Routed interface {
	RoutedBy(h *fasthttp.ResponseHeader, x *upstream.Exchange)
}

// Source is a committed stream's source: its headers, and the frame the
// pipeline's relay loop writes when the stream breaks after the commit
// (class, eof: it ended without its final event), having counted the
// cut; the source words it and does what a break means for it.
type Source interface {
	Routed
	Interrupt(buf []byte, class messages.FailureClass, eof bool, rid string) []byte
}
