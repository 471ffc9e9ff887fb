package quota

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/backoff"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
)

// poller asks a provider's usage API on an interval. The HTTP exchange
// runs on its own goroutine and comes back as a message, so the actor
// never blocks; failures back off exponentially (with jitter, pollBackoff)
// up to MaxPollBackoff or eight intervals, whichever is longer. The next
// poll is a timer of the injected clock that only sends pollNow.
type poller struct {
	parent  *actor.PID
	spec    PollSpec
	clk     clock.Clock
	client  *http.Client
	onPoll  func(ok bool)
	backoff backoff.Backoff // pollBackoff(spec.Interval)
	cancel  context.CancelFunc
	running *pollResult // the result slot of the poll in flight (nil: none)
	timer   clock.Timer
	wg      sync.WaitGroup
	last    []quota.Value
}

// MaxPollBackoff caps the delay between failing polls.
const MaxPollBackoff = 10 * time.Minute

type pollNow struct{}

type pollResult struct {
	values []quota.Value
	err    error
	at     time.Time // when the poll started
}

func (p *poller) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		ctx.Send(ctx.Self(), pollNow{})
	case *actor.Restarting, *actor.Stopping:
		if p.timer != nil {
			p.timer.Stop()
		}
		if p.cancel != nil {
			p.cancel()
		}
		p.wg.Wait()
	case pollNow:
		p.start(ctx)
	case *pollResult:
		if m != p.running {
			return // the answer of a poll an earlier incarnation started
		}
		p.cancel, p.running = nil, nil
		p.done(ctx, m)
	}
}

func (p *poller) start(ctx actor.Context) {
	if p.cancel != nil {
		return // a poll is still running
	}
	timeout := p.spec.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	c, cancel := context.WithTimeout(context.Background(), timeout)
	p.cancel = cancel
	self, root := ctx.Self(), ctx.ActorSystem().Root
	spec, client, now := p.spec, p.client, p.clk.Now()
	expires := now.Add(2*spec.Interval + timeout)
	res := &pollResult{at: now}
	p.running = res
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		res.values, res.err = Fetch(c, client, spec, now, expires)
		root.Send(self, res)
	}()
}

func (p *poller) done(ctx actor.Context, r *pollResult) {
	reading := quota.Reading{Source: quota.SourceProviderAPI, Supported: true, Values: r.values}
	next := p.spec.Interval
	if r.err != nil {
		reading.Err = r.err.Error()
		next = p.backoff.Failed()
		if len(r.values) == 0 && len(p.last) > 0 {
			// Keep the last good values until they expire: a failed poll
			// is no evidence that the quota changed.
			reading.Values = p.last
		}
	} else {
		p.backoff.Succeeded()
		p.last = r.values
	}
	if p.onPoll != nil {
		p.onPoll(r.err == nil)
	}
	ctx.Send(p.parent, &readingUpdate{source: quota.SourceProviderAPI, reading: reading, at: r.at})
	root, self := ctx.ActorSystem().Root, ctx.Self()
	p.timer = p.clk.AfterFunc(next, func() { root.Send(self, pollNow{}) })
}

// pollBackoff is the delay before the next poll after the n-th failure in
// a row: interval × 2^n with ±20 % jitter, capped (before the jitter) at
// the larger of MaxPollBackoff and eight intervals.
func pollBackoff(interval time.Duration) backoff.Policy {
	return backoff.Policy{Base: 2 * interval, Max: max(MaxPollBackoff, 8*interval), Factor: 2, Jitter: backoff.Around(0.2)}
}

// Fetch performs one poll of spec's API and parses the answer. Errors
// name the endpoint and the status, never the credential.
func Fetch(ctx context.Context, client *http.Client, spec PollSpec, now, expires time.Time) ([]quota.Value, error) {
	base := strings.TrimRight(spec.BaseURL, "/")
	switch spec.Kind {
	case quota.PollOpenRouter:
		var errs []error
		var out []quota.Value
		if body, err := get(ctx, client, base+"/key", spec.APIKey); err != nil {
			errs = append(errs, err)
		} else if vs, err := quota.ParseOpenRouterKey(body, now, expires); err != nil {
			errs = append(errs, fmt.Errorf("GET /key: %w", err))
		} else {
			out = append(out, vs...)
		}
		if body, err := get(ctx, client, base+"/credits", spec.APIKey); err != nil {
			errs = append(errs, err)
		} else if vs, err := quota.ParseOpenRouterCredits(body, expires); err != nil {
			errs = append(errs, fmt.Errorf("GET /credits: %w", err))
		} else {
			out = append(out, vs...)
		}
		return out, errors.Join(errs...)
	case quota.PollDeepSeek:
		body, err := get(ctx, client, base+"/user/balance", spec.APIKey)
		if err != nil {
			return nil, err
		}
		vs, err := quota.ParseDeepSeekBalance(body, expires)
		if err != nil {
			return nil, fmt.Errorf("GET /user/balance: %w", err)
		}
		return vs, nil
	}
	return nil, fmt.Errorf("unknown quota API kind %q", spec.Kind)
}

func get(ctx context.Context, client *http.Client, rawURL, key string) ([]byte, error) {
	path := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		path = u.Path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", path, err)
	}
	req.Header.Set("Accept", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL; the path is enough
		}
		return nil, fmt.Errorf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the answer: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	return body, nil
}
