package messages

// The credit grains' protocol: a node's credit leases (actors/credit)
// and the grain of a cluster-wide budget, which may live on another member.
// Both messages are cluster messages (cluster.go) and travel on the one
// wire (wire.go).

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
	// Seq numbers a rolling request among the node's calls to this grain
	// (1, 2, ...; 0: none). A call whose answer did not come (a timeout,
	// a store write that may or may not have landed) is sent again with
	// the same Seq and content, and the grain, which keeps each node's
	// last Seq with its answer in its durable record, applies it once:
	// a retry after a lost answer gets the grant the first one made, and
	// give-backs are never taken twice.
	Seq uint64
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

func (m *CreditRequest) wire(c *wireCodec) {
	c.u8((*uint8)(&m.Op))
	c.str(&m.Node)
	c.uvarint(&m.Window)
	c.varint(&m.Amount)
	c.varint(&m.Need)
	wireList(c, &m.Backs, MaxCreditBacks, 2, (*CreditBack).wire)
	c.uvarint(&m.Seq)
}

func (b *CreditBack) wire(c *wireCodec) {
	c.varint(&b.At)
	c.varint(&b.N)
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

func (m *CreditReply) wire(c *wireCodec) {
	c.flags(&m.Recovering, &m.Unavailable, &m.Contended, &m.Refused)
	c.u8(&m.Period)
	for _, p := range [...]*int64{&m.Granted, &m.Left, &m.At, &m.WaitMs, &m.ResetMs, &m.Limit} {
		c.varint(p)
	}
}
