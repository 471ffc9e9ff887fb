//go:build linux

package edge

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// hangupWatcher notices a client closing its connection while the gateway
// is still waiting on the provider, and cancels the upstream exchange.
//
// fasthttp gives a handler no close notification, and polling each
// connection costs a syscall per request per poll. Instead the watcher keeps
// one epoll instance, separate from the Go runtime's, on which the client
// socket of each request that has been waiting for armDelay is registered
// for EPOLLRDHUP (peer closed or shut down its write side) only, one-shot.
// One goroutine blocks in EpollWait; an event cancels the exchange whose
// registration token it carries. Data arriving on the socket (a pipelined
// request) raises no event. A second goroutine sweeps the Registry every
// armDelay to arm requests that became due, and sleeps while nothing is
// registered.
type hangupWatcher struct {
	reg  *Registry
	log  *slog.Logger
	epfd int
	wake [2]int // pipe that stops the event loop
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func newHangupWatcher(reg *Registry, log *slog.Logger) *hangupWatcher {
	w := &hangupWatcher{reg: reg, log: log, epfd: -1, stop: make(chan struct{})}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		log.Warn("client hang-up detection unavailable; upstream calls of vanished clients run to their timeouts", "err", err)
		return w
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		log.Warn("client hang-up detection unavailable", "err", err)
		return w
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: -1}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p[0], &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(p[0])
		syscall.Close(p[1])
		log.Warn("client hang-up detection unavailable", "err", err)
		return w
	}
	w.epfd, w.wake = epfd, p
	reg.arm = w
	w.wg.Add(2)
	go w.loop()
	go w.sweep()
	return w
}

func (w *hangupWatcher) loop() {
	defer w.wg.Done()
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(w.epfd, events, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			w.log.Warn("client hang-up watcher stopped", "err", err)
			return
		}
		for i := 0; i < n; i++ {
			e := events[i]
			if e.Fd == -1 {
				return // woken by Close
			}
			w.reg.cancel(Token{shard: uint32(e.Fd) >> 24, idx: uint32(e.Fd) & 0xffffff, gen: uint32(e.Pad)})
		}
	}
}

// sweep arms due requests every armDelay while any are registered, and
// sleeps (Registry.sleep) after sleepAfter sweeps found none.
func (w *hangupWatcher) sweep() {
	defer w.wg.Done()
	t := time.NewTicker(armDelay)
	defer t.Stop()
	empty := 0
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			if w.reg.armDue(now.Add(-armDelay)) > 0 {
				empty = 0
				continue
			}
			if empty++; empty < sleepAfter {
				continue
			}
			t.Stop()
			if !w.reg.sleep(w.stop) {
				return
			}
			empty = 0
			t.Reset(armDelay)
		}
	}
}

// arm registers conn's socket with the token t; the Registry holds the
// shard lock.
func (w *hangupWatcher) arm(conn net.Conn, t Token) (int, bool) {
	if t.idx > 0xffffff {
		return -1, false
	}
	fd := connFD(conn)
	if fd < 0 {
		return -1, false
	}
	ev := syscall.EpollEvent{
		Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT | epollET,
		Fd:     int32(t.shard<<24 | t.idx),
		Pad:    int32(t.gen),
	}
	err := syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, fd, &ev)
	if errors.Is(err, syscall.EEXIST) {
		err = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_MOD, fd, &ev)
	}
	if err != nil {
		return -1, false
	}
	return fd, true
}

const epollET = 1 << 31 // EPOLLET as a uint32 bit

func (w *hangupWatcher) disarm(fd int) {
	_ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
}

// Close stops the watcher goroutines.
func (w *hangupWatcher) Close() {
	w.once.Do(func() {
		if w.epfd < 0 {
			return
		}
		close(w.stop)
		_, _ = syscall.Write(w.wake[1], []byte{1})
		w.wg.Wait()
		syscall.Close(w.epfd)
		syscall.Close(w.wake[0])
		syscall.Close(w.wake[1])
	})
}

// watchable reports whether a hang-up of conn can be seen.
func (w *hangupWatcher) watchable(conn net.Conn) bool { return w.epfd >= 0 && connFD(conn) >= 0 }

// connFD returns the socket descriptor behind conn, or -1.
func connFD(conn net.Conn) int {
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		conn = nc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}
