//go:build !race

package tenant

import "testing"

// Allocation tests run without -race: the race detector makes sync.Pool
// drop items on purpose, which would count as allocations.

func TestIdentifyAllocatesNothing(t *testing.T) {
	r, _ := NewResolver(secret, ModeOpen, false, nil)
	key := []byte("sk-test-0123456789")
	r.Identify(key, true)
	if a := testing.AllocsPerRun(200, func() { r.Identify(key, true) }); a != 0 {
		t.Fatalf("Identify allocated %.1f times; want 0", a)
	}
}
