// Package clusterwire carries the cluster's messages (messages.ClusterMessage)
// over protoactor's remote layer: one codec (messages.EncodeCluster and
// DecodeCluster) in one carrier, a protobuf BytesValue (a well-known type:
// no code generation step and no protoc in CI). Every sender wraps with
// Wrap and every receiver unwraps with Unwrap (UnwrapAs, when it takes one
// kind), and a receiver notes what it could not read in a Refusals, which
// counts it and logs it through the one redaction path.
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

// UnwrapAs is Unwrap for a receiver that takes one kind: it also refuses
// a valid message of another kind, naming the kind and the receiver.
func UnwrapAs[T messages.ClusterMessage](msg any, receiver string) (T, error) {
	var none T
	m, err := Unwrap(msg)
	if err != nil {
		return none, err
	}
	t, ok := m.(T)
	if !ok {
		return none, fmt.Errorf("%w: a %s sent to %s", messages.ErrClusterMessage, m.ClusterKind(), receiver)
	}
	return t, nil
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
