package credit

import (
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The grain protocol travels as protobuf BytesValue (a well-known type,
// so no code generation step and no protoc in CI) holding a fixed binary
// layout of varints. A handful of fields and one reply do not justify a
// .proto file and a generator pinned to protoactor's protobuf version.
//
// A request carries no limit and no window length: the grain takes both
// from its own node's configuration and clock (Budgets), so a peer cannot
// set them. What a request names (a calendar window, a grant to give back
// to) the grain checks against its own clock.

type op uint8

const (
	// opAcquire asks for up to amount more credit (calendar: in window;
	// rolling: now; slots: more slots), after giving back backs.
	opAcquire op = 1
	// opRelease gives amount back (calendar: of window; slots: slots), or
	// the backs (rolling).
	opRelease op = 2
	// opRenew reports the slots the node holds (amount) and extends its
	// lease; a grain that is recovering rebuilds its table from these.
	opRenew op = 3
)

// back is rolling credit given back: n units of the grant stamped at.
type back struct {
	at int64 // the grant's stamp, the grain's clock (Unix ns)
	n  int64
}

// maxBacks bounds the give-backs one message carries.
const maxBacks = 64

// request is what a node's lease actor sends a grain.
type request struct {
	op   op
	node string
	// window is a calendar budget's window index, or the slots a node
	// holds (slots).
	window uint64
	amount int64
	// need is how much of amount a request the node refused needs
	// (rolling; 0: none): when even that does not fit, the grain says
	// when it will.
	need  int64
	backs []back
}

// reply is the grain's answer.
type reply struct {
	// granted: calendar and rolling, what this call granted; slots, what
	// the node holds after the call.
	granted int64
	// left is what remains for everyone (the tightest window's limit
	// minus what is out).
	left int64
	// at stamps a rolling grant (the grain's clock, Unix ns): give credit
	// back naming it.
	at int64
	// waitMs is, when this grant left a window full, how long until
	// need (or one unit) would fit (rolling); resetMs how long until the
	// tightest window holds nothing again.
	waitMs, resetMs int64
	// limit and period are the tightest window's (rolling), for the
	// rate-limit headers.
	limit  int64
	period uint8
	// recovering is set while a fresh slots grain rebuilds its table.
	recovering bool
	// unavailable is set when the grain could not make its state durable
	// (the store is unreachable), or does not know the budget on its own
	// node (not configured there, or not yet): nothing was granted.
	unavailable bool
	// contended is set by a slots grain that refused a node slots within
	// the last LeaseTTL, or a rolling grain that filled a window within
	// the last CreditTTL: holders then keep no idle slot or credit.
	contended bool
	// refused is set when the request named a window or a grant outside
	// what the grain's clock allows (now ± one period): nothing changed.
	refused bool
}

var errWire = errors.New("credit: malformed grain message")

func (r *request) encode() *wrapperspb.BytesValue {
	b := make([]byte, 0, 32+len(r.node)+len(r.backs)*16)
	b = append(b, byte(r.op))
	b = binary.AppendUvarint(b, uint64(len(r.node)))
	b = append(b, r.node...)
	b = binary.AppendUvarint(b, r.window)
	b = binary.AppendVarint(b, r.amount)
	b = binary.AppendVarint(b, r.need)
	b = binary.AppendUvarint(b, uint64(len(r.backs)))
	for _, k := range r.backs {
		b = binary.AppendVarint(b, k.at)
		b = binary.AppendVarint(b, k.n)
	}
	return wrapperspb.Bytes(b)
}

// varints reads n varints from b into the pointers, or fails.
func varints(b []byte, out ...*int64) ([]byte, error) {
	for _, o := range out {
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, errWire
		}
		*o, b = v, b[k:]
	}
	return b, nil
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
	b, err := varints(b[k:], &r.amount, &r.need)
	if err != nil {
		return r, err
	}
	nb, k := binary.Uvarint(b)
	if k <= 0 || nb > maxBacks {
		return r, errWire
	}
	b = b[k:]
	for range nb {
		var bk back
		if b, err = varints(b, &bk.at, &bk.n); err != nil {
			return r, err
		}
		r.backs = append(r.backs, bk)
	}
	return r, nil
}

func (r *reply) encode() *wrapperspb.BytesValue {
	b := make([]byte, 0, 48)
	var flags byte
	for i, f := range [...]bool{r.recovering, r.unavailable, r.contended, r.refused} {
		if f {
			flags |= 1 << i
		}
	}
	b = append(b, flags, r.period)
	for _, v := range [...]int64{r.granted, r.left, r.at, r.waitMs, r.resetMs, r.limit} {
		b = binary.AppendVarint(b, v)
	}
	return wrapperspb.Bytes(b)
}

func decodeReply(b []byte) (reply, error) {
	var r reply
	if len(b) < 2 {
		return r, errWire
	}
	r.recovering, r.unavailable, r.contended, r.refused = b[0]&1 != 0, b[0]&2 != 0, b[0]&4 != 0, b[0]&8 != 0
	r.period = b[1]
	_, err := varints(b[2:], &r.granted, &r.left, &r.at, &r.waitMs, &r.resetMs, &r.limit)
	return r, err
}
