// Package admission decides whether an agent call may go upstream now:
// per tenant, instance, user and connector, a bound on the calls in flight
// (concurrency) and a token bucket (golang.org/x/time/rate); and the
// waits an upstream asked for (Retry-After, X-RateLimit-*, RateLimit-*),
// per credential (Learn); and a fair share, across tenants, of the
// budget of a central OAuth client.
//
// The operator sets the defaults (Options.Defaults); a tenant's admins may
// lower them for their tenant (Store). A refusal is a typed error:
// rate_limited or concurrency_limited, with retryAfterMs.
//
// A call no limit applies to costs a map lookup and no allocation
// (Controller.Admit); a nil *Controller admits everything.
package admission

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/metrics"
)

// Call is what admission knows of a call.
type Call struct {
	Tenant, Instance, User, Connector string
	// PerUser says that the upstream credential is the user's own (the
	// oauth modes): the waits an upstream asks for are kept per user.
	// Otherwise the instance's credential is shared by its users.
	PerUser bool
	// Client is the central OAuth client (the platform provider) whose
	// budget the call uses (mode oauthCentral); "" for none.
	Client string
}

// Options configure a Controller.
type Options struct {
	// Defaults are the operator's limits of every tenant.
	Defaults Limits
	// Clients are the call budgets, in calls a second, of central OAuth
	// clients by provider (mode oauthCentral), which their providers
	// limit as a whole: each is shared fairly by the tenants using it.
	Clients map[string]float64
	// Window is the period of a central client's fair share (longer for
	// a budget under 100 calls a window); 0 is DefaultWindow.
	Window time.Duration
	// Store holds the tenants' own limits; nil: the defaults only.
	Store *Store
	// Refresh is how often a replica reads the tenants' limits again
	// (changes made on another replica); 0 is DefaultRefresh.
	Refresh time.Duration
	// Shared, when set, holds the rate limits' token buckets that the
	// replicas on one PostgreSQL database share: a rate limit then holds
	// across replicas (see Shared for the bound). nil: each replica
	// counts on its own (the embedded store, one process).
	Shared *Shared
	// QueueWait is how long a call over a concurrency limit waits for a
	// call in flight to end before it is refused (concurrency_limited);
	// 0 refuses at once.
	QueueWait time.Duration
	// IgnoreUpstreamWaits turns off learning from upstream rate-limit
	// headers (Learn): every call goes upstream and gets its own answer.
	// For upstreams whose limits are per route rather than per
	// credential, where one route's 429 would block the others.
	IgnoreUpstreamWaits bool
	// Now is the clock; nil is time.Now.
	Now     func() time.Time
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Defaults of Options.
const (
	DefaultRefresh = 10 * time.Second
	DefaultWindow  = time.Second
)

// Scope names, as in the metrics' scope label.
const (
	scopeTenant    = "tenant"
	scopeInstance  = "instance"
	scopeUser      = "user"
	scopeConnector = "connector"
	scopeClient    = "client"
	scopeUpstream  = "upstream"
)

// Controller admits calls. Its methods are safe for concurrent use.
type Controller struct {
	opts    Options
	now     func() time.Time
	metrics *metrics.Metrics
	logger  *slog.Logger

	// limits maps a tenant id to its limits in force, for the tenants
	// with their own; the others have the defaults.
	limits    atomic.Pointer[map[string]Limits]
	loadedAt  atomic.Int64
	loading   atomic.Bool
	anyLimits atomic.Bool

	mu      sync.Mutex
	buckets map[bucketKey]*bucket
	swept   time.Time

	// upstream are the credentials upstreams told to wait (Learn).
	upstream waits
	// clients are the central clients' fair shares, by provider.
	clients map[string]*fairShare
}

type bucketKey struct {
	scope   uint8
	a, b, c string
}

const (
	kTenant uint8 = iota
	kInstance
	kUser
	kConnector
)

// bucket is the state of one key: its calls in flight and its token
// bucket (nil without a rate).
type bucket struct {
	inflight int
	// freed, when not nil, is closed when a call in flight ends: calls
	// queued at the concurrency limit wait on it.
	freed chan struct{}
	lim   *rate.Limiter
	limit Limit

	// With Options.Shared, the tokens of the rate come from the shared
	// bucket, key, in leases: have tokens until expires. empty: the
	// shared bucket had no batch; refuse until then. fetching is closed
	// when the lease being asked for is in. failed: the last lease failed,
	// lim (this replica's own bucket) decides until then.
	key            string
	have           int
	expires, empty time.Time
	failed         time.Time
	fetching       chan struct{}
}

// New returns a controller.
func New(o Options) *Controller {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	c := &Controller{opts: o, now: o.Now, metrics: o.Metrics, logger: o.Logger, buckets: map[bucketKey]*bucket{}}
	if c.now == nil {
		c.now = time.Now
	}
	c.swept = c.now()
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.upstream.until = map[credKey]time.Time{}
	c.clients = map[string]*fairShare{}
	for name, r := range o.Clients {
		if r > 0 {
			c.clients[name] = newFairShare(r, o.Window)
		}
	}
	empty := map[string]Limits{}
	c.limits.Store(&empty)
	c.anyLimits.Store(!o.Defaults.IsZero())
	return c
}

// Defaults returns the operator's limits.
func (c *Controller) Defaults() Limits { return c.opts.Defaults }

// Load reads the tenants' own limits from the store. The server calls it
// at start; Admit calls it again, in the background, every Refresh.
func (c *Controller) Load(ctx context.Context) error {
	c.loadedAt.Store(c.now().UnixNano())
	if c.opts.Store == nil {
		return nil
	}
	own, err := c.opts.Store.All(ctx)
	if err != nil {
		return err
	}
	in := make(map[string]Limits, len(own))
	for t, ls := range own {
		in[t] = ls.Within(c.opts.Defaults)
	}
	c.limits.Store(&in)
	c.anyLimits.Store(!c.opts.Defaults.IsZero() || len(in) > 0)
	return nil
}

// refresh reloads the tenants' limits in the background when they are
// older than Refresh.
func (c *Controller) refresh(now time.Time) {
	if c.opts.Store == nil || now.UnixNano()-c.loadedAt.Load() < int64(c.opts.Refresh) || !c.loading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.loading.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Load(ctx); err != nil {
			c.logger.Warn("reading the tenants' call limits", "err", err)
		}
	}()
}

// Limits returns the limits in force for tenant.
func (c *Controller) Limits(tenant string) Limits {
	if ls, ok := (*c.limits.Load())[tenant]; ok {
		return ls
	}
	return c.opts.Defaults
}

// Ticket is an admitted call; Done ends it.
type Ticket struct {
	c    *Controller
	held [4]*bucket
}

// Done releases the call's concurrency slots. Call it once, when the call
// ends.
func (t Ticket) Done() {
	if t.c == nil {
		return
	}
	t.c.mu.Lock()
	for _, b := range t.held {
		if b != nil {
			b.inflight--
			if b.freed != nil {
				close(b.freed)
				b.freed = nil
			}
		}
	}
	t.c.mu.Unlock()
}

// Admit admits call now, or refuses it: rate_limited (a rate limit, a
// wait the upstream asked for, the fair share of a central client) or
// concurrency_limited, each with the wait before a retry. An admitted
// call's Ticket must be Done when the call ends.
func (c *Controller) Admit(ctx context.Context, call Call) (Ticket, error) {
	if c == nil {
		return Ticket{}, nil
	}
	now := c.now()
	if err := c.upstream.check(c, call, now); err != nil {
		return Ticket{}, err
	}
	c.refresh(now)
	var tk Ticket
	if c.anyLimits.Load() {
		var err error
		if tk, err = c.admitLimits(ctx, call, c.Limits(call.Tenant), now); err != nil {
			return Ticket{}, err
		}
	}
	if call.Client != "" {
		if fs := c.clients[call.Client]; fs != nil {
			if err := c.admitClient(fs, call, now); err != nil {
				tk.Done()
				return Ticket{}, err
			}
		}
	}
	return tk, nil
}

// scoped is one scope's limit and key for a call.
type scoped struct {
	name  string
	key   bucketKey
	limit Limit
}

func (c *Controller) admitLimits(ctx context.Context, call Call, ls Limits, now time.Time) (Ticket, error) {
	if ls.IsZero() {
		return Ticket{}, nil
	}
	scopes := [4]scoped{
		{scopeTenant, bucketKey{scope: kTenant, a: call.Tenant}, ls.Tenant},
		{scopeInstance, bucketKey{scope: kInstance, a: call.Tenant, b: call.Instance}, ls.Instance},
		{scopeUser, bucketKey{scope: kUser, a: call.Tenant, b: call.Instance, c: call.User}, ls.User},
		{scopeConnector, bucketKey{scope: kConnector, a: call.Connector}, ls.Connector},
	}
	var queued time.Duration // waited at concurrency limits
	leases := 0              // rounds of leases asked for
	for {
		tk, wait, fetch, err := c.tryLimits(&scopes, now, queued)
		switch {
		case err != nil:
			return Ticket{}, err
		case wait != nil:
			start := time.Now()
			timer := time.NewTimer(c.opts.QueueWait - queued)
			select {
			case <-wait:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
			queued += time.Since(start)
			if ctx.Err() != nil {
				queued = c.opts.QueueWait // refused at the next try
			}
		case fetch != [4]*bucket{}:
			leases++
			for i, b := range fetch {
				if b == nil {
					continue
				}
				if leases > maxLeaseAttempts {
					// Other calls of this replica spent each lease
					// before this one had its token.
					c.metrics.AdmissionRefused(scopes[i].name, "rate")
					return Ticket{}, errRate(scopes[i].name, scopes[i].limit.Rate, leaseSpan)
				}
				c.fetchLease(ctx, b)
			}
		default:
			return tk, nil
		}
		now = c.now()
	}
}

// maxLeaseAttempts bounds the leases a call asks for before it is refused.
const maxLeaseAttempts = 3

// tryLimits admits the call under scopes now, or refuses it, or says what
// it waits for: wait (a call in flight to end, at a concurrency limit,
// having queued for queued so far) or fetch (leases of tokens from the
// shared buckets). c.mu is taken and released.
func (c *Controller) tryLimits(scopes *[4]scoped, now time.Time, queued time.Duration) (Ticket, <-chan struct{}, [4]*bucket, error) {
	tk := Ticket{c: c}
	var bs, fetch [4]*bucket
	c.mu.Lock()
	c.sweep(now)
	for i := range scopes {
		s := &scopes[i]
		if s.limit.IsZero() {
			continue
		}
		b := c.bucket(s.key, s.limit, now)
		bs[i] = b
		if s.limit.Concurrency > 0 {
			if b.inflight >= s.limit.Concurrency {
				if queued < c.opts.QueueWait {
					if b.freed == nil {
						b.freed = make(chan struct{})
					}
					wait := b.freed
					c.mu.Unlock()
					tk.Done()
					return Ticket{}, wait, fetch, nil
				}
				c.mu.Unlock()
				tk.Done()
				c.metrics.AdmissionRefused(s.name, "concurrency")
				return Ticket{}, nil, fetch, errConcurrency(s.name, s.limit.Concurrency, queued)
			}
			b.inflight++
			tk.held[i] = b
		}
	}
	// Every bucket must hold a token before one is taken from any.
	for i := range scopes {
		s := &scopes[i]
		b := bs[i]
		if b == nil || b.lim == nil {
			continue
		}
		if b.key != "" && !now.Before(b.failed) {
			switch {
			case b.have > 0 && now.Before(b.expires):
				continue
			case now.Before(b.empty):
				c.mu.Unlock()
				tk.Done()
				c.metrics.AdmissionRefused(s.name, "rate")
				return Ticket{}, nil, fetch, errRate(s.name, s.limit.Rate, b.empty.Sub(now))
			}
			fetch[i] = b
			continue
		}
		if tokens := b.lim.TokensAt(now); tokens < 1 {
			c.mu.Unlock()
			tk.Done()
			c.metrics.AdmissionRefused(s.name, "rate")
			wait := time.Duration((1 - tokens) / s.limit.Rate * float64(time.Second))
			return Ticket{}, nil, fetch, errRate(s.name, s.limit.Rate, wait)
		}
	}
	if fetch != [4]*bucket{} {
		c.mu.Unlock()
		tk.Done()
		return Ticket{}, nil, fetch, nil
	}
	for _, b := range bs {
		switch {
		case b == nil || b.lim == nil:
		case b.key != "" && !now.Before(b.failed):
			b.have--
		default:
			b.lim.AllowN(now, 1)
		}
	}
	c.mu.Unlock()
	return tk, nil, fetch, nil
}

// fetchLease leases a batch of tokens for b from its shared bucket, giving
// back those of its expired lease; one lease at a time per bucket (a call
// that finds one under way waits for it).
func (c *Controller) fetchLease(ctx context.Context, b *bucket) {
	c.mu.Lock()
	now := c.now()
	if b.fetching != nil {
		ch := b.fetching
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return
	}
	if (b.have > 0 && now.Before(b.expires)) || now.Before(b.empty) || now.Before(b.failed) {
		c.mu.Unlock()
		return
	}
	back, limit, key := b.have, b.limit, b.key
	b.have = 0
	done := make(chan struct{})
	b.fetching = done
	c.mu.Unlock()

	n := limit.batch()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseTimeout)
	granted, left, err := c.opts.Shared.lease(lctx, key, limit, n, back)
	cancel()

	c.mu.Lock()
	now = c.now()
	b.fetching = nil
	close(done)
	switch {
	case err != nil:
		// This replica's own bucket decides for a while: the limit
		// holds per replica (as without Shared) rather than refusing
		// every call while the database is away.
		b.failed = now.Add(leaseRetry)
	case granted > 0:
		b.have, b.expires = granted, now.Add(c.opts.Shared.ttl())
	default:
		// Until a batch is back in the shared bucket.
		b.empty = now.Add(time.Duration((float64(n) - left) / limit.Rate * float64(time.Second)))
	}
	c.mu.Unlock()
	if err != nil {
		c.logger.Warn("leasing call tokens from the shared bucket; this replica counts on its own for a while", "err", err.Error())
	}
}

// leaseTimeout bounds a lease's statement; leaseRetry is how long a
// replica counts on its own after a lease failed.
const (
	leaseTimeout = 2 * time.Second
	leaseRetry   = 5 * time.Second
)

// bucket returns key's bucket, made or adjusted for limit. c.mu is held.
func (c *Controller) bucket(key bucketKey, limit Limit, now time.Time) *bucket {
	b := c.buckets[key]
	if b == nil {
		b = &bucket{limit: limit}
		if limit.Rate > 0 {
			b.lim = rate.NewLimiter(rate.Limit(limit.Rate), limit.burst())
			b.lim.SetLimitAt(now, rate.Limit(limit.Rate)) // start full at now
			if c.opts.Shared != nil {
				b.key = sharedKey(key)
			}
		}
		c.buckets[key] = b
		return b
	}
	if b.limit != limit {
		switch {
		case limit.Rate == 0:
			b.lim = nil
		case b.lim == nil:
			b.lim = rate.NewLimiter(rate.Limit(limit.Rate), limit.burst())
			if c.opts.Shared != nil {
				b.key = sharedKey(key)
			}
		default:
			b.lim.SetLimitAt(now, rate.Limit(limit.Rate))
			b.lim.SetBurstAt(now, limit.burst())
		}
		b.limit = limit
	}
	return b
}

// sweepEvery is how often idle buckets are dropped: those with no call in
// flight and a full bucket, whose state a new bucket would have.
const sweepEvery = time.Minute

// sweep drops idle buckets. c.mu is held.
func (c *Controller) sweep(now time.Time) {
	if now.Sub(c.swept) < sweepEvery {
		return
	}
	c.swept = now
	for k, b := range c.buckets {
		if b.inflight == 0 && b.fetching == nil && (b.lim == nil || b.lim.TokensAt(now) >= float64(b.lim.Burst())) &&
			(b.key == "" || !now.Before(b.expires)) {
			delete(c.buckets, k)
		}
	}
	if sh := c.opts.Shared; sh != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
			defer cancel()
			if err := sh.sweep(ctx); err != nil {
				c.logger.Warn("deleting full shared call buckets", "err", err.Error())
			}
		}()
	}
}

// DefaultConcurrencyRetry is the retryAfterMs of concurrency_limited.
const DefaultConcurrencyRetry = 250 * time.Millisecond

func errConcurrency(scope string, n int, queued time.Duration) error {
	msg := fmt.Sprintf("this %s already has %d calls in flight, its limit; retry when one ends", scope, n)
	if queued > 0 {
		msg = fmt.Sprintf("this %s had %d calls in flight, its limit, for the %s this call may wait; retry when one ends", scope, n, retryIn(queued))
	}
	return &switchboard.Error{Kind: switchboard.ErrUnavailable, Code: "concurrency_limited", RetryAfter: DefaultConcurrencyRetry, Message: msg}
}

func errRate(scope string, perSecond float64, wait time.Duration) error {
	wait = retryIn(wait)
	return &switchboard.Error{Kind: switchboard.ErrUnavailable, Code: "rate_limited", RetryAfter: wait,
		Message: fmt.Sprintf("this %s's call rate limit (%g a second) is reached; retry after %s", scope, perSecond, wait)}
}
