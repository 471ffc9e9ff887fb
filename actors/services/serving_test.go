package services

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"
)

// TestVerifyServerKnowsItsOwnChild: a connection to a running service is
// accepted only from the child's own listener; a stopped service serves
// nothing, whatever holds its port; a listener of another process group
// (here: the test's own) is not the child's.
func TestVerifyServerKnowsItsOwnChild(t *testing.T) {
	_, h := oneServing(t, "own")
	if err := h.VerifyServer(); !errors.Is(err, ErrNotServing) || h.Serving() {
		t.Fatalf("a stopped service: %v, serving %v", err, h.Serving())
	}
	st, err := h.Start(ctx10(t))
	if err != nil || st.State != Running {
		t.Fatalf("start: %v %+v", err, st)
	}
	if !h.Serving() {
		t.Fatal("a running, healthy service is not serving")
	}
	for i := 0; i < 2; i++ { // the second from the cache
		if err := h.VerifyServer(); err != nil {
			t.Fatalf("the child's own listener, check %d: %v", i, err)
		}
	}
	if runtime.GOOS == "linux" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		inodes, known := acceptingInodes(ln.Addr().(*net.TCPAddr).Port)
		if !known || len(inodes) != 1 || groupHolds(*st.PID, inodes) {
			t.Fatalf("the test's listener: %v known %v, held by the child's group %v", inodes, known, groupHolds(*st.PID, inodes))
		}
		// The kernel's socket diagnostics and /proc agree.
		for _, port := range []int{ln.Addr().(*net.TCPAddr).Port, h.Spec().Port} {
			d, dok := diagListeners(port)
			p, pok := procListeners(port)
			if !dok || !pok || len(d) != 1 || fmt.Sprint(d) != fmt.Sprint(p) {
				t.Fatalf("port %d: diag %v %v, /proc %v %v", port, d, dok, p, pok)
			}
		}
		start := time.Now()
		for i := 0; i < 100; i++ {
			if err := h.VerifyServer(); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("VerifyServer (cached proof): %v per new connection", time.Since(start)/100)
	}
	if _, err := h.Stop(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	if err := h.VerifyServer(); !errors.Is(err, ErrNotServing) {
		t.Fatalf("after stop: %v", err)
	}
}
