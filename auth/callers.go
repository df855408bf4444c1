package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/metrics"
	"github.com/switchboardhq/switchboard/tenants"
)

// Principal is an authenticated caller of an app instance: the tenant it
// belongs to, the credential, and the agent and user it acts as.
type Principal struct {
	Tenant     switchboard.TenantID
	TenantSlug string
	Caller     *tenants.Caller
	// AgentID is the agent the call is made for: fixed by the credential,
	// or named per request (X-Agent-Id) by an agent platform. Empty when
	// none was given; validateAgent refuses that.
	AgentID string
	// UserID is the end user the call is made for, if any: fixed by the
	// credential, or named per request (X-User-Id) by an agent platform.
	UserID string
	// Trusted callers may act for a targetUserId.
	Trusted bool
	// Kind is the caller kind (tenants.KindAgentPlatform, ...).
	Kind string
	// TargetUserID is the user a call asks to act for (targetUserId). It
	// is honoured only for trusted callers: see Subject.
	TargetUserID string
}

// Subject is the user whose credentials a call is made with: the
// TargetUserID when the caller is trusted and names one, else the caller's
// own UserID. An untrusted caller's targetUserId is ignored.
func (p *Principal) Subject() string {
	if p == nil {
		return ""
	}
	if p.Trusted && p.TargetUserID != "" {
		return p.TargetUserID
	}
	return p.UserID
}

// OnBehalf reports whether the call acts for a user other than the
// caller's own (a trusted caller's targetUserId).
func (p *Principal) OnBehalf() bool {
	return p != nil && p.Trusted && p.TargetUserID != "" && p.TargetUserID != p.UserID
}

// WithTarget returns a copy of p asking to act for user (a targetUserId).
// An empty or over-long user returns p unchanged.
func (p *Principal) WithTarget(user string) *Principal {
	if p == nil || user == "" || len(user) > maxIdentity {
		return p
	}
	q := *p
	q.TargetUserID = user
	return &q
}

// Request headers an agent platform names its agent and user with.
const (
	HeaderAgentID = "X-Agent-Id"
	HeaderUserID  = "X-User-Id"
)

// maxIdentity bounds agent and user ids taken from headers; longer values
// can match no allowlist entry and are dropped.
const maxIdentity = 128

// Callers authenticates caller credentials. Live callers are cached in
// memory by token hash, so a warm request costs no database round trip;
// Invalidate drops revoked callers at once. Refusals are cheap too: an
// unknown or revoked token is remembered for UnknownTokenTTL, and a source
// whose credentials keep failing has its cache misses refused without a
// lookup (AuthFailuresPerSource a minute). Every lookup is keyed by the
// token's SHA-256, never by the token, so its timing tells a prober
// nothing about stored tokens.
type Callers struct {
	store *tenants.Store
	// touches counts the last-use writes in flight (touch), which Wait
	// waits for.
	touches sync.WaitGroup
	// metrics counts the cache's hits and misses (SetMetrics).
	metrics *metrics.Metrics

	// unknown holds the hashes of tokens the store did not know (or knew
	// revoked): refused again without a query until they expire, or until
	// a caller is created (Invalidate).
	unknown *expirable.LRU[tokenKey, struct{}]
	// failures counts the authentication failures per source (remote
	// address) within a window of authFailureWindow.
	failures *expirable.LRU[string, *atomic.Int32]
	failMu   sync.Mutex // makes failed's get-or-add one step
	// failureLimit is the number of failures a source may have within
	// the window before its cache misses are refused; 0 turns the limit
	// off.
	failureLimit int32
	// sourceOf names the source of a request (SetSources).
	sourceOf func(*http.Request) string

	mu sync.RWMutex
	// byHash maps the token's hash (tenants.TokenDigest) to the cached caller, bounded
	// by the cache budget and TTL (SetCache).
	byHash *callerCache
	// gen increases on every invalidation, so that a lookup that raced with
	// one does not cache what it read.
	gen uint64

	// jwt verifies platform-signed caller JWTs; nil accepts none.
	jwt *CallerJWT
	// tenants caches tenants by slug for JWT callers.
	tenants map[string]*tenants.Tenant

	// memberCache checks the users callers name.
	memberCache
}

// SetJWT makes the authenticator accept caller JWTs verified by v, besides
// the API keys a tenant issues. Call it before serving.
func (c *Callers) SetJWT(v *CallerJWT) { c.jwt = v }

type cachedCaller struct {
	caller *tenants.Caller
	// slug is the slug of the caller's tenant once it has been seen.
	slug string
	// touched is when this server last recorded the caller's use (Unix
	// nanoseconds), so that it records it at most once per
	// tenants.CallerTouchInterval.
	touched atomic.Int64
	// size is what the entry is counted at in the cache's budget.
	size int64
}

// Bounds of the refusal caches. A token is 256 random bits, so an
// unknown one stays unknown: the TTL only bounds how long a pathological
// entry lives. The per-source budget is what makes a flood of distinct
// bad tokens cheap.
const (
	UnknownTokenTTL       = 30 * time.Second
	maxUnknownTokens      = 10_000
	AuthFailuresPerSource = 10
	authFailureWindow     = time.Minute
	maxFailureSources     = 10_000
)

// errTooManyFailures refuses a source over its budget of authentication
// failures; a caller already authenticated on this server still gets in.
var errTooManyFailures = switchboard.E(switchboard.ErrUnavailable, "rate_limited",
	"too many failed authentications from this address; retry in a minute")

// NewCallers returns an authenticator over store.
func NewCallers(store *tenants.Store) *Callers {
	return &Callers{store: store, byHash: newCallerCache(DefaultCacheBudget, DefaultCacheTTL),
		unknown:      expirable.NewLRU[tokenKey, struct{}](maxUnknownTokens, nil, UnknownTokenTTL),
		failures:     expirable.NewLRU[string, *atomic.Int32](maxFailureSources, nil, authFailureWindow),
		failureLimit: AuthFailuresPerSource,
		sourceOf:     remoteHost,
	}
}

// SetSources sets how authentication failures are limited: limit
// failures a minute per source (0 turns the limit off), the source being
// the request's remote address, or, when that address is one of the
// trusted proxies, the client address the proxies name in
// X-Forwarded-For (the right-most one that is not itself a trusted
// proxy). Without trusted proxies X-Forwarded-For is ignored, so that a
// client cannot choose its own source. Behind a proxy that is not listed
// every client shares the proxy's address, and one client's failures
// would refuse everyone's first request: list the proxies, or turn the
// limit off. Call it before serving.
func (c *Callers) SetSources(limit int, trusted []*net.IPNet) {
	c.failureLimit = int32(max(limit, 0))
	c.sourceOf = remoteHost
	if len(trusted) > 0 {
		// echo's extractor walks X-Forwarded-For from the right, trusting
		// only the ranges given (not loopback or private networks by
		// default, which it would otherwise trust).
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range trusted {
			opts = append(opts, echo.TrustIPRange(n))
		}
		c.sourceOf = echo.ExtractIPFromXFFHeader(opts...)
	}
}

// Cache defaults. The budget is counted in the bytes each cached caller
// is estimated to hold (callerCache.cost); the minCallers most recently
// used stay whatever the budget.
const (
	DefaultCacheBudget = 64 << 20
	DefaultCacheTTL    = 10 * time.Minute
	minCallers         = 8
)

// tokenKey is a token's SHA-256, the key of the token caches: an array,
// so that reading them allocates nothing (a hex string of it, the stored
// form, was made per request).
type tokenKey [sha256.Size]byte

// callerCache holds authenticated callers by token hash, least recently
// used first out, bounded by the bytes they are estimated to hold and by
// a TTL. expirable's LRU keeps the order and the TTL; it bounds entries
// by count only, so the bytes are counted here, as the gateway's
// instance cache does: every addition evicts the oldest callers until
// the total is within the budget. Additions are made under Callers.mu.
type callerCache struct {
	*expirable.LRU[tokenKey, *cachedCaller]
	budget int64
	used   atomic.Int64
}

func newCallerCache(budget int64, ttl time.Duration) *callerCache {
	if budget <= 0 {
		budget = DefaultCacheBudget
	}
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	c := &callerCache{budget: budget}
	// The count bound is never the one reached: no caller costs less
	// than callerFixedCost.
	c.LRU = expirable.NewLRU(int(budget/callerFixedCost)+2*minCallers, func(_ tokenKey, e *cachedCaller) {
		c.used.Add(-e.size)
	}, ttl)
	return c
}

// add caches e under hash (replacing what was there) and evicts the least
// recently used callers beyond the budget, keeping at least minCallers.
func (c *callerCache) add(hash tokenKey, e *cachedCaller) {
	c.Remove(hash) // expirable's Add replaces without the eviction callback
	e.size = callerCost(e.caller)
	c.used.Add(e.size)
	c.Add(hash, e)
	for c.used.Load() > c.budget && c.Len() > minCallers {
		if _, _, ok := c.RemoveOldest(); !ok {
			break
		}
	}
}

// callerFixedCost estimates the bytes of a cached caller besides its
// strings: the Caller row and its timestamps, the cache entry and its
// slots in the LRU's map and TTL bucket.
const callerFixedCost = 512

// callerCost estimates the bytes a cached caller holds.
func callerCost(cl *tenants.Caller) int64 {
	n := callerFixedCost + len(tokenKey{}) + len(cl.ID) + len(cl.TenantID) + len(cl.Name) + len(cl.Kind) +
		len(cl.AgentID) + len(cl.UserID) + len(cl.UserMode)
	for _, s := range cl.ExternalSubjects {
		n += 16 + len(s)
	}
	return int64(n)
}

// SetMetrics counts the cache's hits and misses in m. Call it before
// serving.
func (c *Callers) SetMetrics(m *metrics.Metrics) { c.metrics = m }

// SetCache bounds the cache of authenticated callers by a memory budget
// in bytes and a TTL (0 keeps the default). Call it before serving.
func (c *Callers) SetCache(budget int64, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byHash = newCallerCache(budget, ttl)
}

// remoteHost is the request's remote address without its port: the
// source of authentication failures when no proxy is trusted.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// overBudget reports whether src has failed failureLimit times
// within the window.
func (c *Callers) overBudget(src string) bool {
	n, ok := c.failures.Get(src)
	return c.failureLimit > 0 && ok && n.Load() >= c.failureLimit
}

// failed counts a failed authentication of src.
func (c *Callers) failed(src string) {
	c.failMu.Lock()
	n, ok := c.failures.Get(src)
	if !ok {
		n = new(atomic.Int32)
		c.failures.Add(src, n)
	}
	c.failMu.Unlock()
	n.Add(1)
}

// errNoCredential and errBadCredential are what unauthenticated requests
// get. A credential of another tenant gets errBadCredential too, so the
// answer does not reveal whether the URL's tenant exists.
var (
	errNoCredential = switchboard.E(switchboard.ErrUnauthorized, "unauthorized",
		"a caller credential is required: send Authorization: Bearer <token>")
	errBadCredential = switchboard.E(switchboard.ErrUnauthorized, "unauthorized",
		"the caller credential is not valid for this workspace")
)

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	if token == "" || strings.ContainsAny(token, " \t") || len(token) > 1024 {
		return "", false
	}
	return token, true
}

// Authenticate resolves the request's bearer credential to a principal of
// the tenant tenantSlug. A missing, unknown or revoked credential, or one
// issued by another tenant, is an *switchboard.Error of kind
// ErrUnauthorized with code "unauthorized".
func (c *Callers) Authenticate(ctx context.Context, r *http.Request, tenantSlug string) (*Principal, error) {
	return c.AuthenticateInto(ctx, r, tenantSlug, nil)
}

// AuthenticateInto is Authenticate with the principal of an API key
// written into *into when into is not nil (memory the caller allocated
// for its request anyway), instead of a principal allocated per call. The
// principal of a JWT is allocated as before.
func (c *Callers) AuthenticateInto(ctx context.Context, r *http.Request, tenantSlug string, into *Principal) (*Principal, error) {
	token, ok := bearer(r)
	if !ok {
		return nil, errNoCredential
	}
	if c.jwt != nil && looksLikeJWT(token) {
		return c.authenticateJWT(ctx, r, token, tenantSlug)
	}
	hash := tokenKey(tenants.TokenDigest(token))

	c.mu.RLock()
	entry, _ := c.byHash.Get(hash)
	gen := c.gen
	c.mu.RUnlock()

	c.metrics.Lookup(metrics.CacheCaller, entry != nil)
	if entry == nil {
		src := c.sourceOf(r)
		if c.unknown.Contains(hash) {
			c.failed(src)
			return nil, errBadCredential
		}
		if c.overBudget(src) {
			return nil, errTooManyFailures
		}
		caller, err := c.store.CallerByToken(ctx, token)
		if errors.Is(err, switchboard.ErrUnauthorized) {
			c.failed(src)
			c.mu.Lock()
			if c.gen == gen {
				c.unknown.Add(hash, struct{}{})
			}
			c.mu.Unlock()
			return nil, errBadCredential
		}
		if err != nil {
			return nil, err
		}
		entry = &cachedCaller{caller: caller}
		if caller.LastUsedAt != nil {
			entry.touched.Store(caller.LastUsedAt.UnixNano())
		}
		c.mu.Lock()
		if c.gen == gen {
			c.byHash.add(hash, entry)
		}
		c.mu.Unlock()
	}

	c.mu.RLock()
	slug := entry.slug
	c.mu.RUnlock()
	if slug == "" {
		// First request of this caller: learn its tenant's slug, once. A
		// token sent to other tenants' URLs counts as a failure.
		src := c.sourceOf(r)
		if c.overBudget(src) {
			return nil, errTooManyFailures
		}
		t, err := c.store.CachedTenant(ctx, tenantSlug)
		if errors.Is(err, switchboard.ErrNotFound) {
			c.failed(src)
			return nil, errBadCredential
		}
		if err != nil {
			return nil, err
		}
		if t.ID != entry.caller.TenantID {
			c.failed(src)
			return nil, errBadCredential
		}
		c.mu.Lock()
		entry.slug = t.Slug
		c.mu.Unlock()
		slug = t.Slug
	}
	if slug != tenantSlug {
		return nil, errBadCredential
	}

	caller := entry.caller
	p := into
	if p == nil {
		p = new(Principal)
	}
	*p = Principal{
		Tenant:     caller.TenantID,
		TenantSlug: slug,
		Caller:     caller,
		AgentID:    caller.AgentID,
		UserID:     caller.UserID,
		Trusted:    caller.Trusted,
		Kind:       caller.Kind,
	}
	if caller.Kind == tenants.KindAgentPlatform && p.AgentID == "" {
		p.AgentID = identityHeader(r, HeaderAgentID)
	}
	if err := c.establishUser(ctx, r, p); err != nil {
		return nil, err
	}
	c.touch(entry)
	return p, nil
}

// touch records the caller's use when this server has not recorded it
// for tenants.CallerTouchInterval. The write runs off the call's path and
// is best effort: a caller whose use cannot be recorded still calls.
func (c *Callers) touch(e *cachedCaller) {
	now := time.Now()
	last := e.touched.Load()
	if now.UnixNano()-last < int64(tenants.CallerTouchInterval) || !e.touched.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	c.touches.Add(1)
	go func() {
		defer c.touches.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.store.TouchCaller(ctx, e.caller.ID, now)
	}()
}

// Wait returns once the last-use writes started so far have ended. Call
// it before closing the store: database/sql's Close does not wait for
// queries in progress, so a write could otherwise outlive the store (on
// SQLite, touching its files after they were removed).
func (c *Callers) Wait() { c.touches.Wait() }

func identityHeader(r *http.Request, name string) string {
	v := strings.TrimSpace(r.Header.Get(name))
	if len(v) > maxIdentity {
		return ""
	}
	return v
}

// Invalidate drops what ch makes stale: a revoked caller, and every
// token remembered as unknown when a caller is created (its token may be
// one of them). Subscribe it to tenants.Service changes.
func (c *Callers) Invalidate(ch tenants.Change) {
	if ch.Caller == "" && !ch.All {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.unknown.Purge()
	if ch.All {
		c.byHash.Purge()
		return
	}
	for _, h := range c.byHash.Keys() {
		if e, ok := c.byHash.Peek(h); ok && e.caller.ID == ch.Caller {
			c.byHash.Remove(h)
		}
	}
}
