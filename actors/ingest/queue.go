package ingest

import (
	"time"
)

// waiter is one queued request.
type waiter struct {
	key      [20]byte
	bytes    int64
	count    bool
	deadline time.Time
	// passedOver is when the waiter, at its lane's turn and within its
	// deficit, first did not fit the free budget (zero while not).
	passedOver time.Time
	lane       *lane
	ref        any // the owner's handle (the AcquireBytes message)
}

// lane is one fairness key's FIFO.
type lane struct {
	key      [20]byte
	weight   int64
	q        []*waiter
	deficit  int64
	credited bool  // the lane's current turn has received its quantum
	rounds   int64 // turns credited so far (see fairQueue.floor)
}

func (l *lane) head() *waiter { return l.q[0] }

// fairQueue is the waiting room: per-key FIFO queues served by deficit
// round robin weighted by bytes. Each turn a lane receives quantum×weight
// bytes of credit and serves heads while they fit its credit, so over a
// backlogged period every key gets bytes in proportion to its weight
// whatever its body sizes (plain round robin would give a key with 10 MiB
// bodies 10,000 times the bytes of a key with 1 KiB bodies).
//
// The budget is shared, so a head whose turn it is may not fit the free
// bytes. The lane is then owed its turn: it is served first as soon as
// capacity allows, while other lanes may go on using their turns (work
// conserving; a light caller is not held up behind a large body). Rounds
// keep that bypass honest: a lane starts a new turn only when no lane is
// still in an earlier round (floor), so no lane gets more than one turn
// ahead of a lane waiting for capacity and byte shares stay with the
// weights. A head passed over for starveAfter is reserved: nobody else is
// admitted until it fits, so a large body cannot be starved by a churn of
// new keys either.
//
// fairQueue is pure: it reads no clock and owns no capacity. The caller
// passes the time and a take function that claims capacity for a waiter.
// It is not safe for concurrent use; the ingest actor owns it.
type fairQueue struct {
	lanes       map[[20]byte]*lane
	active      []*lane // rotation order: lanes with waiters
	cursor      int
	blocked     *lane // owed its turn: its head fit its credit, not the budget
	reserved    *waiter
	floor       int64 // the earliest round a lane is in
	n           int
	queuedBytes int64

	quantum     int64
	starveAfter time.Duration
	weight      func(key [20]byte) int64
}

func newFairQueue(quantum int64, starveAfter time.Duration, weight func([20]byte) int64) *fairQueue {
	if quantum < 1 {
		quantum = 1
	}
	return &fairQueue{lanes: map[[20]byte]*lane{}, quantum: quantum, starveAfter: starveAfter, weight: weight}
}

// push appends w to its key's FIFO. A new key joins in the current round.
func (q *fairQueue) push(w *waiter) {
	l := q.lanes[w.key]
	if l == nil {
		wt := int64(1)
		if q.weight != nil {
			if x := q.weight(w.key); x > 0 {
				wt = x
			}
		}
		if len(q.active) == 0 {
			q.floor = 0
		}
		l = &lane{key: w.key, weight: wt, rounds: q.floor}
		q.lanes[w.key] = l
		q.active = append(q.active, l)
	}
	w.lane = l
	l.q = append(l.q, w)
	q.n++
	q.queuedBytes += w.bytes
}

// remove takes w out of the queue wherever it is (timeout, cancel).
func (q *fairQueue) remove(w *waiter) bool {
	l := w.lane
	if l == nil {
		return false
	}
	for i, x := range l.q {
		if x == w {
			copy(l.q[i:], l.q[i+1:])
			l.q[len(l.q)-1] = nil
			l.q = l.q[:len(l.q)-1]
			q.forget(w)
			return true
		}
	}
	return false
}

// forget updates the totals after w left its lane.
func (q *fairQueue) forget(w *waiter) {
	q.n--
	q.queuedBytes -= w.bytes
	if q.reserved == w {
		q.reserved = nil
	}
	l := w.lane
	w.lane = nil
	if q.blocked == l {
		q.blocked = nil // the lane's (new) head is judged again at its turn
	}
	if len(l.q) == 0 {
		q.dropLane(l)
	}
}

func (q *fairQueue) dropLane(l *lane) {
	delete(q.lanes, l.key)
	for i, x := range q.active {
		if x == l {
			copy(q.active[i:], q.active[i+1:])
			q.active[len(q.active)-1] = nil
			q.active = q.active[:len(q.active)-1]
			if i < q.cursor {
				q.cursor--
			}
			break
		}
	}
	if q.cursor >= len(q.active) {
		q.cursor = 0
	}
	q.raiseFloor()
}

// raiseFloor moves the floor up once no lane is left in it.
func (q *fairQueue) raiseFloor() {
	if len(q.active) == 0 {
		return
	}
	low := q.active[0].rounds
	for _, l := range q.active[1:] {
		low = min(low, l.rounds)
	}
	q.floor = max(q.floor, low)
}

// pop removes the head of l, which was granted.
func (q *fairQueue) pop(l *lane) *waiter {
	w := l.q[0]
	copy(l.q, l.q[1:])
	l.q[len(l.q)-1] = nil
	l.q = l.q[:len(l.q)-1]
	w.passedOver = time.Time{}
	q.forget(w)
	return w
}

// credit starts a new turn of l.
func (q *fairQueue) credit(l *lane) {
	l.deficit += q.quantum * l.weight
	l.credited = true
	l.rounds++
	q.raiseFloor()
}

// dispatch grants waiters in fair order while take succeeds. take claims
// the capacity for a waiter (or reports that it does not fit); grant is
// called for every waiter admitted, after it left the queue.
func (q *fairQueue) dispatch(now time.Time, take func(*waiter) bool, grant func(*waiter)) {
	idle := 0 // passes in a row without a grant
	for q.n > 0 {
		// A starved head: nobody else is admitted until it fits.
		if r := q.reserved; r != nil {
			if !take(r) {
				return
			}
			q.serve(r.lane, r, grant)
			continue
		}
		// A lane whose turn came while its head did not fit is owed that
		// turn: it goes first as soon as capacity allows.
		if b := q.blocked; b != nil {
			h := b.head()
			if take(h) {
				q.serve(b, h, grant)
				idle = 0
				continue
			}
			if now.Sub(h.passedOver) >= q.starveAfter {
				q.reserved = h
				continue
			}
		}
		progressed, blocked := false, false
		for visits := 0; visits < len(q.active) && q.n > 0; {
			l := q.active[q.cursor]
			if !l.credited {
				if l.rounds > q.floor {
					q.advance() // a turn ahead: the others go first
					visits++
					continue
				}
				q.credit(l)
			}
			h := l.head()
			if h.bytes <= l.deficit {
				if take(h) {
					q.serve(l, h, grant)
					progressed = true
					if q.lanes[l.key] == nil {
						visits++ // the lane emptied; the cursor moved on
					}
					continue // the lane keeps its turn while its heads fit
				}
				// Its turn, but the budget is short: the turn (and its
				// credit) waits for capacity.
				if h.passedOver.IsZero() {
					h.passedOver = now
				}
				if q.blocked == nil {
					q.blocked = l
				}
				blocked = true
				q.advance()
				visits++
				continue
			}
			l.credited = false // turn over; the credit carries to the next turn
			q.advance()
			visits++
		}
		if progressed {
			idle = 0
			continue
		}
		if blocked || q.blocked != nil {
			return // bound by capacity: wait for a release
		}
		if idle++; idle >= 2 {
			q.fastForward()
			idle = 0
		}
	}
}

// serve grants h, the head of l, charging l's credit; l keeps its turn.
func (q *fairQueue) serve(l *lane, h *waiter, grant func(*waiter)) {
	l.deficit = max(0, l.deficit-h.bytes)
	for i, x := range q.active {
		if x == l {
			q.cursor = i
			break
		}
	}
	q.pop(l)
	grant(h)
}

func (q *fairQueue) advance() {
	if len(q.active) > 0 {
		q.cursor = (q.cursor + 1) % len(q.active)
	}
}

// fastForward credits every lane the whole rounds it would take, turn by
// turn, until the first head fits its lane's credit, so waiting for a large
// head costs one step instead of head/quantum idle rounds. It applies only
// when every lane is between turns in the same round.
func (q *fairQueue) fastForward() {
	rounds := int64(-1)
	for _, l := range q.active {
		if l.credited || l.rounds != q.floor {
			return
		}
		per := q.quantum * l.weight
		need := (l.head().bytes - l.deficit + per - 1) / per
		if rounds < 0 || need < rounds {
			rounds = need
		}
	}
	// The next pass adds one quantum itself.
	if rounds--; rounds > 0 {
		for _, l := range q.active {
			l.deficit += rounds * q.quantum * l.weight
			l.rounds += rounds
		}
		q.floor += rounds
	}
}

// expire removes every waiter whose deadline passed and reports each.
func (q *fairQueue) expire(now time.Time, out func(*waiter)) {
	if q.n == 0 {
		return
	}
	var due []*waiter
	for _, l := range q.active {
		for _, w := range l.q {
			if !now.Before(w.deadline) {
				due = append(due, w)
			}
		}
	}
	for _, w := range due {
		q.remove(w)
		out(w)
	}
}

// nextDeadline returns the earliest deadline (zero when empty).
func (q *fairQueue) nextDeadline() time.Time {
	var t time.Time
	for _, l := range q.active {
		for _, w := range l.q {
			if t.IsZero() || w.deadline.Before(t) {
				t = w.deadline
			}
		}
	}
	return t
}

// laneCounts lists each key with its number of waiters.
func (q *fairQueue) laneCounts() []LaneView {
	out := make([]LaneView, 0, len(q.active))
	for _, l := range q.active {
		out = append(out, LaneView{key: l.key, Waiting: len(l.q)})
	}
	return out
}
