package messages

import (
	"errors"
	"fmt"
	"math"
)

// Cluster messages are the ones that travel between members through the
// remote layer (protoactor remote, behind internal/cluster's gate). They
// all go through one codec (EncodeCluster, DecodeCluster in wire.go): the
// remote layer needs a protobuf message, and the senders wrap the bytes in
// a protobuf BytesValue (a well-known type: no code generation step).
// Their fields are plain numbers and strings (times as Unix counts), so a
// message that decoded is equal to the one encoded. None of them carries a
// credential: a peer sends values, and what a value may do (a budget's
// limit, a cooldown's cap) is decided by the receiving member's own
// configuration and clock.

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
// package's types implement it (its wire methods are unexported), so the
// codec knows every message it may meet.
type ClusterMessage interface {
	// ClusterKind is the message's wire tag.
	ClusterKind() ClusterKind
	// Validate says what is wrong with the message (nil: nothing). The
	// codec refuses to encode an invalid message and never returns one.
	Validate() error
	appendWire(w *wireWriter)
	readWire(r *wireReader)
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

// CreditOp is what a CreditRequest asks a credit grain for.
type CreditOp uint8

// Credit operations.
const (
	// CreditAcquire asks for up to Amount more credit (calendar: in
	// Window; rolling: now; slots: more slots), after giving Backs back.
	CreditAcquire CreditOp = 1 + iota
	// CreditRelease gives Amount back (calendar: of Window; slots:
	// slots), or the Backs (rolling).
	CreditRelease
	// CreditRenew reports the slots the node holds (Amount) and extends
	// its lease; a grain that is recovering rebuilds its table from these.
	CreditRenew
)

// CreditBack is rolling credit given back: N units of the grant stamped At.
type CreditBack struct {
	At int64 // the grant's stamp, the grain's clock (Unix ns)
	N  int64
}

// CreditRequest is what a node's lease actor (actors/credit) sends a
// credit grain, a cluster-wide budget hosted on whichever member owns its
// identity (possibly the sender): to take credit or slots, give them back
// or renew a slot lease. It carries no limit and no window length: the
// grain takes both from its own node's configuration and clock, so a peer
// cannot set them.
type CreditRequest struct {
	Op   CreditOp
	Node string // the asking member's id
	// Window is a calendar budget's window index, or the slots a node
	// holds (slots).
	Window uint64
	Amount int64
	// Need is how much of Amount a request the node refused needs
	// (rolling; 0: none): when even that does not fit, the grain says
	// when it will.
	Need  int64
	Backs []CreditBack
}

// ClusterKind implements ClusterMessage.
func (*CreditRequest) ClusterKind() ClusterKind { return KindCreditRequest }

// Validate implements ClusterMessage.
func (m *CreditRequest) Validate() error {
	switch {
	case m.Op < CreditAcquire || m.Op > CreditRenew:
		return invalid(KindCreditRequest, "unknown operation %d", m.Op)
	case m.Node == "":
		return invalid(KindCreditRequest, "no node")
	case len(m.Backs) > MaxCreditBacks:
		return invalid(KindCreditRequest, "%d give-backs, more than %d", len(m.Backs), MaxCreditBacks)
	}
	return nil
}

func (m *CreditRequest) appendWire(w *wireWriter) {
	w.u8(uint8(m.Op))
	w.str(m.Node)
	w.uvarint(m.Window)
	w.varint(m.Amount)
	w.varint(m.Need)
	w.uvarint(uint64(len(m.Backs)))
	for _, b := range m.Backs {
		w.varint(b.At)
		w.varint(b.N)
	}
}

func (m *CreditRequest) readWire(r *wireReader) {
	m.Op = CreditOp(r.u8())
	m.Node = r.str()
	m.Window = r.uvarint()
	m.Amount = r.varint()
	m.Need = r.varint()
	if n := r.count(MaxCreditBacks, 2); n > 0 {
		m.Backs = make([]CreditBack, n)
		for i := range m.Backs {
			m.Backs[i] = CreditBack{At: r.varint(), N: r.varint()}
		}
	}
}

// CreditReply is a credit grain's answer to a CreditRequest.
type CreditReply struct {
	// Granted: calendar and rolling, what this call granted; slots, what
	// the node holds after the call.
	Granted int64
	// Left is what remains for everyone (the tightest window's limit
	// minus what is out).
	Left int64
	// At stamps a rolling grant (the grain's clock, Unix ns): give credit
	// back naming it.
	At int64
	// WaitMs is, when this grant left a window full, how long until need
	// (or one unit) would fit (rolling); ResetMs how long until the
	// tightest window holds nothing again.
	WaitMs, ResetMs int64
	// Limit and Period are the tightest window's (rolling), for the
	// rate-limit headers; Period is an internal/rolling period, which the
	// receiver clamps to the periods it knows.
	Limit  int64
	Period uint8
	// Recovering is set while a fresh slots grain rebuilds its table.
	Recovering bool
	// Unavailable is set when the grain could not make its state durable
	// (the store is unreachable), or does not know the budget on its own
	// node (not configured there, or not yet): nothing was granted.
	Unavailable bool
	// Contended is set by a slots grain that refused a node slots within
	// the last lease TTL, or a rolling grain that filled a window within
	// the last credit TTL: holders then keep no idle slot or credit.
	Contended bool
	// Refused is set when the request named a window or a grant outside
	// what the grain's clock allows (now ± one period), or could not be
	// read: nothing changed.
	Refused bool
}

// ClusterKind implements ClusterMessage.
func (*CreditReply) ClusterKind() ClusterKind { return KindCreditReply }

// Validate implements ClusterMessage: every reply is a valid one.
func (*CreditReply) Validate() error { return nil }

func (m *CreditReply) appendWire(w *wireWriter) {
	w.flags(m.Recovering, m.Unavailable, m.Contended, m.Refused)
	w.u8(m.Period)
	for _, v := range [...]int64{m.Granted, m.Left, m.At, m.WaitMs, m.ResetMs, m.Limit} {
		w.varint(v)
	}
}

func (m *CreditReply) readWire(r *wireReader) {
	f := r.flags(4)
	m.Recovering, m.Unavailable, m.Contended, m.Refused = f[0], f[1], f[2], f[3]
	m.Period = r.u8()
	for _, p := range [...]*int64{&m.Granted, &m.Left, &m.At, &m.WaitMs, &m.ResetMs, &m.Limit} {
		*p = r.varint()
	}
}

// SharedQuotaValue is one value of a provider's usage API, as the member
// that polled it read it (actors/quota's Value, with times as Unix ns; 0:
// unknown or never).
type SharedQuotaValue struct {
	Dimension  QuotaDimension
	Model      string
	Flags      uint8
	Limit      float64
	Used       float64
	Remaining  float64
	ResetAt    int64
	Unit       string
	Confidence uint8
	Expires    int64
}

// SharedQuotaPoll is a connection's usage-API poll reading, which the one
// member that polls the connection (actors/quota's cluster actor picks it
// by rendezvous hashing) sends every other member's quota cluster actor,
// which feeds it to the connection's aggregator as a provider_api reading.
// It names the connection by name: ids are a member's own.
type SharedQuotaPoll struct {
	Conn string
	From string // the sending member's id
	// At is when the poll started (Unix ns).
	At     int64
	Err    string // the poll's error: the endpoint and status, never a credential
	Values []SharedQuotaValue
}

// ClusterKind implements ClusterMessage.
func (*SharedQuotaPoll) ClusterKind() ClusterKind { return KindSharedQuotaPoll }

// Validate implements ClusterMessage: a connection and a sender, known
// dimensions, finite numbers.
func (m *SharedQuotaPoll) Validate() error {
	if m.Conn == "" || m.From == "" {
		return invalid(KindSharedQuotaPoll, "no connection or no sender")
	}
	if len(m.Values) > MaxSharedQuotaItems {
		return invalid(KindSharedQuotaPoll, "%d values, more than %d", len(m.Values), MaxSharedQuotaItems)
	}
	for i := range m.Values {
		v := &m.Values[i]
		if v.Dimension >= NumQuotaDimensions || !finite(v.Limit, v.Used, v.Remaining) {
			return invalid(KindSharedQuotaPoll, "value %d: unknown dimension or a number that is not finite", i)
		}
	}
	return nil
}

func (m *SharedQuotaPoll) appendWire(w *wireWriter) {
	w.str(m.Conn)
	w.str(m.From)
	w.varint(m.At)
	w.str(m.Err)
	w.uvarint(uint64(len(m.Values)))
	for i := range m.Values {
		v := &m.Values[i]
		w.u8(uint8(v.Dimension))
		w.str(v.Model)
		w.u8(v.Flags)
		w.f64(v.Limit)
		w.f64(v.Used)
		w.f64(v.Remaining)
		w.varint(v.ResetAt)
		w.str(v.Unit)
		w.u8(v.Confidence)
		w.varint(v.Expires)
	}
}

func (m *SharedQuotaPoll) readWire(r *wireReader) {
	m.Conn = r.str()
	m.From = r.str()
	m.At = r.varint()
	m.Err = r.str()
	if n := r.count(MaxSharedQuotaItems, 31); n > 0 {
		m.Values = make([]SharedQuotaValue, n)
		for i := range m.Values {
			v := &m.Values[i]
			v.Dimension = QuotaDimension(r.u8())
			v.Model = r.str()
			v.Flags = r.u8()
			v.Limit, v.Used, v.Remaining = r.f64(), r.f64(), r.f64()
			v.ResetAt = r.varint()
			v.Unit = r.str()
			v.Confidence = r.u8()
			v.Expires = r.varint()
		}
	}
}

// SharedQuotaReading is one dimension of a response's rate-limit headers
// (QuotaReading, with times as Unix ns and the window in ns).
type SharedQuotaReading struct {
	Dimension QuotaDimension
	Flags     uint8
	Limit     float64
	Remaining float64
	ResetAt   int64 // 0: unknown
	Window    int64
}

// SharedQuotaObservation is one model's latest header observation.
type SharedQuotaObservation struct {
	Model    string
	At       int64 // when the response was received (Unix ns); never 0
	Readings []SharedQuotaReading
}

// SharedQuotaHeaders is a batch of a connection's header observations
// (the latest per model), which a member's header adapter coalesced and
// its quota cluster actor sends every other member's, which feeds them to
// the connection's header adapter as response_headers readings.
type SharedQuotaHeaders struct {
	Conn         string
	From         string // the sending member's id
	Observations []SharedQuotaObservation
}

// ClusterKind implements ClusterMessage.
func (*SharedQuotaHeaders) ClusterKind() ClusterKind { return KindSharedQuotaHeaders }

// Validate implements ClusterMessage: a connection and a sender, at most
// MaxQuotaReadings per observation, known dimensions, finite numbers.
func (m *SharedQuotaHeaders) Validate() error {
	if m.Conn == "" || m.From == "" {
		return invalid(KindSharedQuotaHeaders, "no connection or no sender")
	}
	if len(m.Observations) > MaxSharedQuotaItems {
		return invalid(KindSharedQuotaHeaders, "%d observations, more than %d", len(m.Observations), MaxSharedQuotaItems)
	}
	for i := range m.Observations {
		o := &m.Observations[i]
		if o.At == 0 || len(o.Readings) > MaxQuotaReadings {
			return invalid(KindSharedQuotaHeaders, "observation %d: no time, or more than %d readings", i, MaxQuotaReadings)
		}
		for j := range o.Readings {
			if r := &o.Readings[j]; r.Dimension >= NumQuotaDimensions || !finite(r.Limit, r.Remaining) {
				return invalid(KindSharedQuotaHeaders, "observation %d, reading %d: unknown dimension or a number that is not finite", i, j)
			}
		}
	}
	return nil
}

func (m *SharedQuotaHeaders) appendWire(w *wireWriter) {
	w.str(m.Conn)
	w.str(m.From)
	w.uvarint(uint64(len(m.Observations)))
	for i := range m.Observations {
		o := &m.Observations[i]
		w.str(o.Model)
		w.varint(o.At)
		w.uvarint(uint64(len(o.Readings)))
		for j := range o.Readings {
			r := &o.Readings[j]
			w.u8(uint8(r.Dimension))
			w.u8(r.Flags)
			w.f64(r.Limit)
			w.f64(r.Remaining)
			w.varint(r.ResetAt)
			w.varint(r.Window)
		}
	}
}

func (m *SharedQuotaHeaders) readWire(r *wireReader) {
	m.Conn = r.str()
	m.From = r.str()
	if n := r.count(MaxSharedQuotaItems, 3); n > 0 {
		m.Observations = make([]SharedQuotaObservation, n)
		for i := range m.Observations {
			o := &m.Observations[i]
			o.Model = r.str()
			o.At = r.varint()
			if k := r.count(MaxQuotaReadings, 20); k > 0 {
				o.Readings = make([]SharedQuotaReading, k)
				for j := range o.Readings {
					x := &o.Readings[j]
					x.Dimension = QuotaDimension(r.u8())
					x.Flags = r.u8()
					x.Limit, x.Remaining = r.f64(), r.f64()
					x.ResetAt = r.varint()
					x.Window = r.varint()
				}
			}
		}
	}
}

// SharedCooldown tells every other member that a failure on the sender
// opened a target's circuit or pushed its cooldown later (transport's
// cooldowns hook sends it, each member's cooldowns actor receives it and
// cools the target of that name until Until, capped by its own clock).
type SharedCooldown struct {
	Target string // the target's name: ids are a member's own
	Until  int64  // Unix ms
	Reason string
	From   string // the sending member's id
}

// ClusterKind implements ClusterMessage.
func (*SharedCooldown) ClusterKind() ClusterKind { return KindSharedCooldown }

// Validate implements ClusterMessage: a target and a sender.
func (m *SharedCooldown) Validate() error {
	if m.Target == "" || m.From == "" {
		return invalid(KindSharedCooldown, "no target or no sender")
	}
	return nil
}

func (m *SharedCooldown) appendWire(w *wireWriter) {
	w.str(m.Target)
	w.varint(m.Until)
	w.str(m.Reason)
	w.str(m.From)
}

func (m *SharedCooldown) readWire(r *wireReader) {
	m.Target = r.str()
	m.Until = r.varint()
	m.Reason = r.str()
	m.From = r.str()
}

func finite(fs ...float64) bool {
	for _, f := range fs {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}
