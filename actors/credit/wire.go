package credit

import (
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The grain protocol travels as protobuf BytesValue (a well-known type,
// so no code generation step and no protoc in CI) holding a fixed binary
// layout of varints. Four fields and one reply do not justify a .proto
// file and a generator pinned to protoactor's protobuf version.

type op uint8

const (
	// opAcquire asks for up to amount more credit (window: in window;
	// slots: more slots) under limit.
	opAcquire op = 1
	// opRelease gives amount back (window: of window; slots: slots).
	opRelease op = 2
	// opRenew reports the slots the node holds (amount) and extends its
	// lease; a grain that is recovering rebuilds its table from these.
	opRenew op = 3
)

// request is what a node's lease actor sends a grain.
type request struct {
	op     op
	node   string
	window uint64
	amount int64
	limit  int64
}

// reply is the grain's answer.
type reply struct {
	// granted: window mode, what this call granted; slots mode, what the
	// node holds after the call.
	granted int64
	// left is what remains for everyone (limit minus what is out).
	left int64
	// recovering is set while a fresh slots grain rebuilds its table.
	recovering bool
	// unavailable is set when the grain could not make its state durable
	// (the store is unreachable): nothing was granted.
	unavailable bool
	// contended is set by a slots grain that refused a node slots within
	// the last LeaseTTL: holders then keep no idle slot.
	contended bool
}

var errWire = errors.New("credit: malformed grain message")

func (r *request) encode() *wrapperspb.BytesValue {
	b := make([]byte, 0, 32+len(r.node))
	b = append(b, byte(r.op))
	b = binary.AppendUvarint(b, uint64(len(r.node)))
	b = append(b, r.node...)
	b = binary.AppendUvarint(b, r.window)
	b = binary.AppendVarint(b, r.amount)
	b = binary.AppendVarint(b, r.limit)
	return wrapperspb.Bytes(b)
}

func decodeRequest(b []byte) (request, error) {
	var r request
	if len(b) < 1 {
		return r, errWire
	}
	r.op, b = op(b[0]), b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return r, errWire
	}
	r.node, b = string(b[k:k+int(n)]), b[k+int(n):]
	if r.window, k = binary.Uvarint(b); k <= 0 {
		return r, errWire
	}
	b = b[k:]
	if r.amount, k = binary.Varint(b); k <= 0 {
		return r, errWire
	}
	b = b[k:]
	if r.limit, k = binary.Varint(b); k <= 0 {
		return r, errWire
	}
	return r, nil
}

func (r *reply) encode() *wrapperspb.BytesValue {
	b := make([]byte, 0, 24)
	var flags byte
	if r.recovering {
		flags |= 1
	}
	if r.unavailable {
		flags |= 2
	}
	if r.contended {
		flags |= 4
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, r.granted)
	b = binary.AppendVarint(b, r.left)
	return wrapperspb.Bytes(b)
}

func decodeReply(b []byte) (reply, error) {
	var r reply
	if len(b) < 1 {
		return r, errWire
	}
	r.recovering, r.unavailable, r.contended = b[0]&1 != 0, b[0]&2 != 0, b[0]&4 != 0
	b = b[1:]
	var k int
	if r.granted, k = binary.Varint(b); k <= 0 {
		return r, errWire
	}
	b = b[k:]
	if r.left, k = binary.Varint(b); k <= 0 {
		return r, errWire
	}
	return r, nil
}
