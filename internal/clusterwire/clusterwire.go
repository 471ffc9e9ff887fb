// Package clusterwire carries the cluster's messages (messages.ClusterMessage)
// over protoactor's remote layer: one codec (messages.EncodeCluster and
// DecodeCluster) in one carrier, a protobuf BytesValue (a well-known type:
// no code generation step and no protoc in CI). Every sender wraps with
// Wrap and every receiver unwraps with Unwrap, and a receiver notes what it
// could not read in a Refusals, which counts it and logs it through the
// one redaction path.
package clusterwire

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/messages"
)

// Wrap encodes m into the remote layer's carrier, or says why it cannot.
func Wrap(m messages.ClusterMessage) (*wrapperspb.BytesValue, error) {
	b, err := messages.EncodeCluster(m)
	if err != nil {
		return nil, err
	}
	return &wrapperspb.BytesValue{Value: b}, nil
}

// Unwrap decodes what the remote layer delivered: a valid cluster message,
// or an error wrapping messages.ErrClusterMessage that says what was wrong
// (another carrier than a BytesValue among them).
func Unwrap(msg any) (messages.ClusterMessage, error) {
	v, ok := msg.(*wrapperspb.BytesValue)
	if !ok || v == nil {
		return nil, fmt.Errorf("%w: a %T, not the cluster's carrier", messages.ErrClusterMessage, msg)
	}
	return messages.DecodeCluster(v.Value)
}

// Refusals counts the cluster messages a receiver could not use and logs
// the first one (a member of another release sends nothing else, so one
// line says it; the count says how many).
type Refusals struct {
	n      atomic.Int64
	logged atomic.Bool
}

// Note counts a refusal and logs the first, at warning level, naming the
// receiver and the reason.
func (r *Refusals) Note(log *slog.Logger, receiver string, err error) {
	r.n.Add(1)
	if log != nil && r.logged.CompareAndSwap(false, true) {
		log.Warn("cluster: dropped a message from a peer that this member cannot read (members of different releases?); further ones are counted only",
			slog.String("receiver", receiver), slog.String("err", sanitize.Secrets(err.Error())))
	}
}

// Count is how many refusals were noted.
func (r *Refusals) Count() int64 { return r.n.Load() }
