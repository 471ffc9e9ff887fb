package testutil

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// Inbox is a subscriber actor for tests: it keeps every message it is
// sent (protoactor's own lifecycle messages aside), in order, so a test
// can check what an actor under test sent its subscriber.
type Inbox struct {
	PID  *actor.PID
	root *actor.RootContext
	mu   sync.Mutex
	got  []any
}

type inboxActor struct{ b *Inbox }

func (a *inboxActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Touch:
	default:
		a.b.mu.Lock()
		a.b.got = append(a.b.got, m)
		a.b.mu.Unlock()
	}
}

// NewInbox spawns an inbox on sys; it stops when the test ends, unless
// the system was shut down before (which stopped it).
func NewInbox(t testing.TB, sys *actor.ActorSystem) *Inbox {
	t.Helper()
	b := &Inbox{root: sys.Root}
	b.PID = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &inboxActor{b: b} }))
	t.Cleanup(func() {
		if !sys.IsStopped() {
			_ = sys.Root.PoisonFuture(b.PID).Wait()
		}
	})
	return b
}

// Messages returns what the inbox took so far, after it handled every
// message sent to it before the call (Drain).
func (b *Inbox) Messages(t testing.TB) []any {
	t.Helper()
	Drain(t, b.root, b.PID)
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]any(nil), b.got...)
}

// Of returns the messages of type T the inbox took so far (Messages).
func Of[T any](t testing.TB, b *Inbox) []T {
	t.Helper()
	var out []T
	for _, m := range b.Messages(t) {
		if v, ok := m.(T); ok {
			out = append(out, v)
		}
	}
	return out
}
