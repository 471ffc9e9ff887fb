package messages

import (
	"errors"
	"fmt"
	"math"
)

// Cluster messages are the ones that travel between members through the
// remote layer (protoactor remote, behind internal/cluster's gate): the
// credit grains' protocol (credit.go), the quota readings members share
// (quota.go) and the cooldowns they share (targets.go). They all go
// through one codec (EncodeCluster, DecodeCluster in wire.go), which lives
// here because only this package's types can implement ClusterMessage, so
// the codec's table of kinds names every message the wire may carry. The
// remote layer needs a protobuf message: internal/clusterwire wraps the
// bytes in a protobuf BytesValue (a well-known type: no code generation
// step), which keeps protobuf out of this package. Their fields are plain
// numbers and strings (times as Unix counts), so a message that decoded is
// equal to the one encoded. None of them carries a credential: a peer
// sends values, and what a value may do (a budget's limit, a cooldown's
// cap) is decided by the receiving member's own configuration and clock.

// ClusterKind tags a cluster message on the wire. The numbers are the
// wire's: never reuse or renumber one.
type ClusterKind uint8

// Cluster message kinds.
const (
	KindCreditRequest ClusterKind = 1 + iota
	KindCreditReply
	KindSharedQuotaPoll
	KindSharedQuotaHeaders
	KindSharedCooldown
	numClusterKinds
)

// clusterKinds is the one table of the kinds: the name errors give and a
// fresh message to decode into. DecodeCluster refuses a kind not in it.
var clusterKinds = [numClusterKinds]struct {
	name string
	new  func() ClusterMessage
}{
	KindCreditRequest:      {"credit_request", func() ClusterMessage { return new(CreditRequest) }},
	KindCreditReply:        {"credit_reply", func() ClusterMessage { return new(CreditReply) }},
	KindSharedQuotaPoll:    {"shared_quota_poll", func() ClusterMessage { return new(SharedQuotaPoll) }},
	KindSharedQuotaHeaders: {"shared_quota_headers", func() ClusterMessage { return new(SharedQuotaHeaders) }},
	KindSharedCooldown:     {"shared_cooldown", func() ClusterMessage { return new(SharedCooldown) }},
}

// String names the kind.
func (k ClusterKind) String() string {
	if k > 0 && k < numClusterKinds {
		return clusterKinds[k].name
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// ClusterKinds lists every kind, in wire order.
func ClusterKinds() []ClusterKind {
	out := make([]ClusterKind, 0, numClusterKinds-1)
	for k := ClusterKind(1); k < numClusterKinds; k++ {
		out = append(out, k)
	}
	return out
}

// ClusterMessage is a message one member sends another. Only this
// package's types implement it (its wire method is unexported), so the
// codec knows every message it may meet.
type ClusterMessage interface {
	// ClusterKind is the message's wire tag.
	ClusterKind() ClusterKind
	// Validate says what is wrong with the message (nil: nothing). The
	// codec refuses to encode an invalid message and never returns one.
	Validate() error
	// wire carries the kind's fields in their wire order (wireCodec).
	wire(c *wireCodec)
}

// Limits of one cluster message. The codec refuses to encode beyond them
// and to decode anything beyond them, before allocating for it.
const (
	// MaxClusterMessageBytes bounds an encoded message, envelope included.
	MaxClusterMessageBytes = 1 << 20
	// MaxClusterString bounds one string field (a node, connection, model
	// or target name, a reason, a poll error).
	MaxClusterString = 4096
	// MaxCreditBacks bounds the rolling credit one CreditRequest gives back.
	MaxCreditBacks = 64
	// MaxSharedQuotaItems bounds a SharedQuotaPoll's values and a
	// SharedQuotaHeaders' observations.
	MaxSharedQuotaItems = 4096
)

// ErrClusterMessage is what every refusal of the codec wraps.
var ErrClusterMessage = errors.New("cluster message")

func invalid(k ClusterKind, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrClusterMessage, k, fmt.Sprintf(format, args...))
}

func finite(fs ...float64) bool {
	for _, f := range fs {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}
