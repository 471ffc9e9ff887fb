package tenants

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/omniroute/gateway/internal/testutil"
)

// TestKeysWatchLink: every change the key store's watch sees reaches the
// keys actor's Reload, as when transport ran the watch; the stop ends the
// watch and returns only once it has returned, so nothing it calls runs
// after the keys actor stops.
func TestKeysWatchLink(t *testing.T) {
	changes := make(chan struct{})
	var returned atomic.Bool
	watch := func(ctx context.Context, onChange func()) {
		defer returned.Store(true)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
				onChange()
			}
		}
	}
	var reloads atomic.Int64
	stop := watchKeys(watch, func() { reloads.Add(1) })
	changes <- struct{}{}
	changes <- struct{}{}
	changes <- struct{}{} // taken only after the second change's Reload returned
	testutil.Until(t, "three reloads", func() bool { return reloads.Load() == 3 })
	stop()
	if !returned.Load() {
		t.Fatal("stop returned before the watch did")
	}
	if n := reloads.Load(); n != 3 {
		t.Fatalf("%d reloads after three changes", n)
	}
}
