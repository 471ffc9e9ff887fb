package testutil

import (
	"net/http"
	"sync"
	"time"
)

// Callers starts n goroutines that each call call over and over with an
// HTTP client of its own (no proxy, the given timeout), until call reports
// false or stop is called; stop ends them and waits for them all. It is the
// load the crash and dashboard tests put on a gateway while they watch it.
func Callers(n int, timeout time.Duration, call func(i int, hc *http.Client) bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: timeout}
			defer hc.CloseIdleConnections()
			for {
				select {
				case <-done:
					return
				default:
				}
				if !call(i, hc) {
					return
				}
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// AtOnce runs f(0) … f(n-1) on n goroutines released together (none
// starts before all are ready) and returns when all have returned: the
// contention the concurrency tests put on a shared limit.
func AtOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			f(i)
		}()
	}
	close(gate)
	wg.Wait()
}
