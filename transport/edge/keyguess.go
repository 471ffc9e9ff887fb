package edge

import (
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Management-key guesses are slowed down per caller address: each address
// may send keyGuessBurst wrong keys at once and one more every
// keyGuessEvery after that (a GCRA bucket of failures). Once its bucket is
// spent, a key attempt from that address is answered 429
// too_many_key_attempts before the key is even compared, so a guesser
// learns nothing from it, and health shows that address the brief view.
// A right key costs nothing; a missing key is no guess.
//
// The decision is per address (IPv6 per /64, as one host often holds a
// whole /64): all of a machine's local callers share 127.0.0.1, so a
// local guesser also locks out the local operator until it stops, the
// price of counting guesses at all (a management key of 32 random bytes
// is out of a guesser's reach either way; the bound is for weak keys).
// The table is bounded (keyGuessTable addresses); when it is full of
// addresses still paying off guesses, new addresses share one overflow
// bucket, so many addresses neither evade the bound nor grow memory.
const (
	keyGuessBurst = 10
	keyGuessEvery = 6 * time.Second
	keyGuessTable = 4096
)

type keyGuesses struct {
	mu sync.Mutex
	// tat is each address's GCRA theoretical arrival time (Unix ns): its
	// bucket holds room for another failure while tat - now <=
	// (burst-1)·every.
	tat      map[netip.Addr]int64
	overflow int64
	limited  map[netip.Addr]bool // addresses already warned about
	warn     func(addr string)
}

func newKeyGuesses(warn func(addr string)) *keyGuesses {
	return &keyGuesses{tat: map[netip.Addr]int64{}, limited: map[netip.Addr]bool{}, warn: warn}
}

// guessAddr is the address a guess is counted under.
func guessAddr(ip []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// wait reports how long addr must wait before its next key attempt (0:
// it may try now).
func (k *keyGuesses) wait(addr netip.Addr, now time.Time) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	tat, ok := k.tat[addr]
	if !ok && len(k.tat) >= keyGuessTable {
		tat = k.overflow
	}
	n := now.UnixNano()
	if over := tat - n - int64(keyGuessBurst-1)*int64(keyGuessEvery); over > 0 {
		return time.Duration(over)
	}
	delete(k.limited, addr) // a later lockout is warned about again
	return 0
}

// failed counts a wrong key from addr.
func (k *keyGuesses) failed(addr netip.Addr, now time.Time) {
	n := now.UnixNano()
	k.mu.Lock()
	tat, ok := k.tat[addr]
	if !ok && len(k.tat) >= keyGuessTable {
		for a, t := range k.tat { // drop the addresses whose buckets are full again
			if t <= n {
				delete(k.tat, a)
				delete(k.limited, a)
			}
		}
	}
	warn := false
	if !ok && len(k.tat) >= keyGuessTable {
		k.overflow = max(k.overflow, n) + int64(keyGuessEvery)
	} else {
		tat = max(tat, n) + int64(keyGuessEvery)
		k.tat[addr] = tat
		if tat-n > int64(keyGuessBurst-1)*int64(keyGuessEvery) && !k.limited[addr] {
			k.limited[addr], warn = true, true
		}
	}
	k.mu.Unlock()
	if warn && k.warn != nil {
		k.warn(addr.String())
	}
}

// keyGuessWait is how long the caller must wait before its next
// management-key attempt (keyGuesses.wait).
func (e *Edge) keyGuessWait(ctx *fasthttp.RequestCtx) time.Duration {
	return e.guesses.wait(guessAddr(ctx.RemoteIP()), e.clk.Now())
}

// keyGuessFailed counts the caller's wrong management key.
func (e *Edge) keyGuessFailed(ctx *fasthttp.RequestCtx) {
	e.guesses.failed(guessAddr(ctx.RemoteIP()), e.clk.Now())
}

// tooManyGuesses is the answer to a key attempt from an address whose
// guesses are spent: the message, and Retry-After set on ctx.
func tooManyGuesses(ctx *fasthttp.RequestCtx, wait time.Duration) string {
	s := int64((wait + time.Second - 1) / time.Second)
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.FormatInt(s, 10))
	return "too many wrong management keys from this address; the next attempt is accepted in " + strconv.FormatInt(s, 10) + "s (see Retry-After)"
}
