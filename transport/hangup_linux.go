//go:build linux

package transport

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
)

// hangupWatcher notices a client closing its connection while the gateway
// is still waiting on the provider, and cancels the upstream exchange.
//
// fasthttp gives a handler no close notification, and polling each
// connection costs a syscall per request per poll. Instead the watcher keeps
// one epoll instance, separate from the Go runtime's, on which each waiting
// request's client socket is registered for EPOLLRDHUP (peer closed or shut
// down its write side) only, one-shot. One goroutine blocks in EpollWait; an
// event cancels the exchange whose registration token it carries. Data
// arriving on the socket (a pipelined request) raises no event.
type hangupWatcher struct {
	reg  *registry
	log  *slog.Logger
	epfd int
	wake [2]int // eventfd-like pipe to stop the loop
	wg   sync.WaitGroup
	once sync.Once
}

func newHangupWatcher(reg *registry, log *slog.Logger) *hangupWatcher {
	w := &hangupWatcher{reg: reg, log: log, epfd: -1}
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
	w.wg.Add(1)
	go w.loop()
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
			t := regToken{shard: uint32(e.Fd) >> 24, idx: uint32(e.Fd) & 0xffffff, gen: uint32(e.Pad)}
			w.reg.cancel(t)
		}
	}
}

// watchHandle is what watch returns for unwatch.
type watchHandle struct {
	fd    int
	token regToken
}

// watch registers conn's socket; events carry t. It reports false when the
// connection is not a socket this watcher can see (the exchange then still
// ends on write errors and timeouts).
func (w *hangupWatcher) watch(conn net.Conn, t regToken) (watchHandle, bool) {
	if w.epfd < 0 || t.idx > 0xffffff {
		return watchHandle{}, false
	}
	fd := connFD(conn)
	if fd < 0 {
		return watchHandle{}, false
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
		return watchHandle{}, false
	}
	return watchHandle{fd: fd, token: t}, true
}

const epollET = 1 << 31 // EPOLLET as a uint32 bit

func (w *hangupWatcher) unwatch(h watchHandle) {
	_ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, h.fd, nil)
}

// Close stops the watcher goroutine.
func (w *hangupWatcher) Close() {
	w.once.Do(func() {
		if w.epfd < 0 {
			return
		}
		_, _ = syscall.Write(w.wake[1], []byte{1})
		w.wg.Wait()
		syscall.Close(w.epfd)
		syscall.Close(w.wake[0])
		syscall.Close(w.wake[1])
	})
}

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
