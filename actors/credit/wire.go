package credit

import (
	"log/slog"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/messages"
)

// The grain protocol is messages.CreditRequest and messages.CreditReply on
// the cluster's one wire (internal/clusterwire). A request carries no
// limit and no window length: the grain takes both from its own node's
// configuration and clock (Budgets), so a peer cannot set them. What a
// request names (a calendar window, a grant to give back to) the grain
// checks against its own clock. A request the grain cannot read is
// answered Refused (nothing changed) and noted in its node's Budgets.

// encodeRequest wraps a request for a grain call.
func encodeRequest(r *messages.CreditRequest) (*wrapperspb.BytesValue, error) {
	return clusterwire.Wrap(r)
}

// decodeRequest reads a grain call.
func decodeRequest(msg any) (*messages.CreditRequest, error) {
	return clusterwire.UnwrapAs[*messages.CreditRequest](msg, "a credit grain")
}

// encodeReply wraps a grain's answer. Every reply is valid and a few
// dozen bytes, so encoding cannot fail; if it ever did, the caller would
// see no reply it can read and count a failed call.
func encodeReply(r *messages.CreditReply) *wrapperspb.BytesValue {
	v, err := clusterwire.Wrap(r)
	if err != nil {
		return &wrapperspb.BytesValue{}
	}
	return v
}

// decodeReply reads a grain's answer.
func decodeReply(msg any) (messages.CreditReply, error) {
	r, err := clusterwire.UnwrapAs[*messages.CreditReply](msg, "a credit grain's caller")
	if err != nil {
		return messages.CreditReply{}, err
	}
	return *r, nil
}

// refused notes a grain message this node could not read.
func (b *Budgets) refused(log *slog.Logger, receiver string, err error) {
	if b != nil {
		b.refusals.Note(log, receiver, err)
	}
}

// Refused counts the grain calls and answers this node could not read
// (malformed, or from a member of another release).
func (b *Budgets) Refused() int64 {
	if b == nil {
		return 0
	}
	return b.refusals.Count()
}
