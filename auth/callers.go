package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/switchboardhq/switchboard"
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
// Invalidate drops revoked callers at once.
type Callers struct {
	store *tenants.Store

	mu sync.RWMutex
	// byHash maps tenants.HashToken(token) to the cached caller.
	byHash map[string]*cachedCaller
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
}

// NewCallers returns an authenticator over store.
func NewCallers(store *tenants.Store) *Callers {
	return &Callers{store: store, byHash: map[string]*cachedCaller{}}
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
	token, ok := bearer(r)
	if !ok {
		return nil, errNoCredential
	}
	if c.jwt != nil && looksLikeJWT(token) {
		return c.authenticateJWT(ctx, r, token, tenantSlug)
	}
	hash := tenants.HashToken(token)

	c.mu.RLock()
	entry := c.byHash[hash]
	gen := c.gen
	c.mu.RUnlock()

	if entry == nil {
		caller, err := c.store.CallerByToken(ctx, token)
		if errors.Is(err, switchboard.ErrUnauthorized) {
			return nil, errBadCredential
		}
		if err != nil {
			return nil, err
		}
		entry = &cachedCaller{caller: caller}
		c.mu.Lock()
		if c.gen == gen {
			c.byHash[hash] = entry
		}
		c.mu.Unlock()
	}

	c.mu.RLock()
	slug := entry.slug
	c.mu.RUnlock()
	if slug == "" {
		// First request of this caller: learn its tenant's slug, once.
		t, err := c.store.Tenant(ctx, tenantSlug)
		if errors.Is(err, switchboard.ErrNotFound) {
			return nil, errBadCredential
		}
		if err != nil {
			return nil, err
		}
		if t.ID != entry.caller.TenantID {
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
	p := &Principal{
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
	return p, nil
}

func identityHeader(r *http.Request, name string) string {
	v := strings.TrimSpace(r.Header.Get(name))
	if len(v) > maxIdentity {
		return ""
	}
	return v
}

// Invalidate drops what ch makes stale: a revoked caller. Subscribe it to
// tenants.Service changes.
func (c *Callers) Invalidate(ch tenants.Change) {
	if ch.Caller == "" && !ch.All {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for h, e := range c.byHash {
		if ch.All || e.caller.ID == ch.Caller {
			delete(c.byHash, h)
		}
	}
}
