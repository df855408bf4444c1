package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/metrics"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// Grant statuses.
const (
	StatusActive            = "active"
	StatusReconnectRequired = "reconnect_required"
)

// OAuthConfig wires OAuth.
type OAuthConfig struct {
	DB        *database.DB
	Secrets   *secrets.Store
	Providers *Providers
	// HTTPClient reaches token and revocation endpoints: the guarded
	// egress client. It must not follow redirects.
	HTTPClient *http.Client
	// PublicURL is the server's public base URL, for redirect URIs and
	// connect URLs.
	PublicURL string
	Logger    *slog.Logger
	// StateTTL is how long an authorization flow may take; default and
	// maximum 10 minutes.
	StateTTL time.Duration
	// Skew is the most a token is refreshed before its expiry; default
	// 30 s. A short-lived token is refreshed in the last tenth of its
	// lifetime instead, so that it is not refreshed on every call.
	Skew time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// ConnectLinkTTL is how long a connect link stays usable; default
	// DefaultConnectLinkTTL.
	ConnectLinkTTL time.Duration
	// Metrics counts token requests by outcome and the token cache's
	// hits and misses; nil counts nothing.
	Metrics *metrics.Metrics
}

// OAuth implements the token-based auth modes — clientCredentials, oauth,
// oauthCentral and jwt — their token cache and refresh lock, and the OAuth
// authorization-code flow.
//
// Tokens are cached in memory and in the store (encrypted), keyed by a
// fingerprint of (tenant, instance, client id, normalised scopes, user,
// mode, token URL): a change of any part makes old tokens unusable. A warm
// call reads memory only. A refresh is single-flight in the process and,
// across replicas, serialised by a lock on the grant's row (Postgres
// SELECT ... FOR UPDATE; the embedded store's write lock); after taking the
// lock it re-reads and refreshes only if the token is still stale, and
// commits a rotated refresh token before the new access token is used.
type OAuth struct {
	store *Store
	// grants hears the grant changes other replicas log.
	grants    *database.ChangeListener
	providers *Providers
	client    *http.Client
	publicURL string
	logger    *slog.Logger
	stateTTL  time.Duration
	skew      time.Duration
	now       func() time.Time
	// connectLinkTTL is the connect links' lifetime (connectlinks.go).
	connectLinkTTL time.Duration

	mu  sync.RWMutex
	mem map[string]*cachedToken
	// unsaved holds tokens fetched while the store failed, by
	// fingerprint, until they are saved (unsaved.go).
	unsaved map[string]*unsavedToken
	sf      singleflight.Group

	tokenRequests atomic.Int64
	metrics       *metrics.Metrics
}

type cachedToken struct {
	access  secrets.Secret
	issued  time.Time
	expiry  time.Time
	version int64
	// reconnect marks a grant that needs the user to reconnect, until
	// until (then the store is read again).
	reconnect bool
	until     time.Time
	// failure, when set, is the code of a failed token request that
	// backs the grant off until until.
	failure string
	// fetched are the other secrets of the request that obtained the
	// token in this process: the refresh token sent and the one received,
	// the JWT assertion. Only SecretsInPlay reads them.
	fetched []secrets.Secret
}

// NewOAuth returns the token-based modes over cfg.
func NewOAuth(cfg OAuthConfig) *OAuth {
	o := &OAuth{store: NewStore(cfg.DB, cfg.Secrets), providers: cfg.Providers, client: cfg.HTTPClient,
		publicURL: strings.TrimRight(cfg.PublicURL, "/"), logger: cfg.Logger, stateTTL: cfg.StateTTL, skew: cfg.Skew,
		now: cfg.Now, connectLinkTTL: cfg.ConnectLinkTTL, metrics: cfg.Metrics, mem: map[string]*cachedToken{}, unsaved: map[string]*unsavedToken{}}
	o.grants = o.store.grantListener()
	if o.client == nil {
		o.client = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.stateTTL <= 0 || o.stateTTL > 10*time.Minute {
		o.stateTTL = 10 * time.Minute
	}
	if o.skew <= 0 {
		o.skew = 30 * time.Second
	}
	if o.now == nil {
		o.now = func() time.Time { return time.Now().UTC() }
	}
	return o
}

// Register adds the modes clientCredentials, oauth, oauthCentral and jwt
// to a.
func (o *OAuth) Register(a *AppAuth) {
	a.Register(registry.ModeClientCredentials, o.clientCredentialsMode)
	a.Register(registry.ModeOAuth, o.userMode)
	a.Register(registry.ModeOAuthCentral, o.userMode)
	a.RegisterCheck(registry.ModeOAuth, o.userConnected)
	a.RegisterCheck(registry.ModeOAuthCentral, o.userConnected)
	a.Register(registry.ModeJWT, o.jwtMode)
}

// TokenRequests returns how many requests this process sent to token
// endpoints.
func (o *OAuth) TokenRequests() int64 { return o.tokenRequests.Load() }

// PublicURL is the server's public base URL.
func (o *OAuth) PublicURL() string { return o.publicURL }

// ConnectURL is where a user (re)connects an oauth or oauthCentral
// instance.
func (o *OAuth) ConnectURL(tenantSlug, instanceSlug string) string {
	return o.publicURL + "/workspaces/" + url.PathEscape(tenantSlug) + "/webhooks/" + url.PathEscape(instanceSlug) + "/oauth/connect"
}

var errNoUser = switchboard.E(switchboard.ErrInvalid, "user_required",
	"this app instance acts with each user's own connection, and the call names no user: use a credential that carries one or send "+HeaderUserID)

var errUserNotFound = switchboard.E(switchboard.ErrNotFound, "user_not_found",
	"no such user is connected to this app instance in this workspace")

// errNoGrant is what obtain returns for a per-user grant that does not
// exist.
var errNoGrant = errors.New("no grant")

// errReconnect is what obtain returns for a grant marked
// reconnect_required.
var errReconnect = errors.New("reconnect required")

// fresh reports whether a token issued at issued and expiring at expiry is
// still good at now: it is refreshed min(Skew, 10% of its lifetime) before
// it expires.
func (o *OAuth) fresh(issued, expiry, now time.Time) bool {
	margin := o.skew
	if life := expiry.Sub(issued); life > 0 && life/10 < margin {
		margin = life / 10
	}
	return now.Add(margin).Before(expiry)
}

// fetchFunc obtains a new token; refresh is the stored refresh token of a
// per-user grant.
type fetchFunc func(ctx context.Context, refresh secrets.Secret) (*oauth2.Token, error)

// token returns a fresh access token for k: from memory when warm, else
// from the store, else from the token endpoint under the refresh lock.
func (o *OAuth) token(ctx context.Context, k grantKey, fetch fetchFunc) (*cachedToken, error) {
	now := o.now()
	o.mu.RLock()
	e := o.mem[k.fp]
	o.mu.RUnlock()
	if e != nil {
		if e.reconnect && now.Before(e.until) {
			return nil, errReconnect
		}
		if e.failure != "" && now.Before(e.until) {
			return nil, backoffError(e.failure, e.until.Sub(now))
		}
		if !e.reconnect && o.fresh(e.issued, e.expiry, now) {
			o.metrics.Lookup(metrics.CacheToken, true)
			return e, nil
		}
	}
	o.metrics.Lookup(metrics.CacheToken, false)
	v, err, _ := o.sf.Do(k.fp, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return o.obtain(ctx, k, fetch)
	})
	if err != nil {
		return nil, err
	}
	return v.(*cachedToken), nil
}

func (o *OAuth) remember(fp string, e *cachedToken) {
	o.mu.Lock()
	o.mem[fp] = e
	o.mu.Unlock()
}

func (o *OAuth) forget(fp string) {
	o.mu.Lock()
	delete(o.mem, fp)
	o.mu.Unlock()
}

// httpContext carries the egress client to golang.org/x/oauth2.
func (o *OAuth) httpContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, o.client)
}

// bearerApplier sends Authorization: Bearer <token>. Reject drops the
// token when the upstream refuses it.
type bearerApplier struct {
	e *cachedToken
	c *clientConfig
	o *OAuth
	k grantKey
}

// Apply implements registry.Applier.
func (b *bearerApplier) Apply(req *http.Request) error {
	v := b.e.access.Reveal()
	if strings.ContainsAny(v, "\r\n\x00") {
		return errBadCredentialValue
	}
	req.Header.Set("Authorization", "Bearer "+v)
	return nil
}

// Reject implements Rejecter.
func (b *bearerApplier) Reject(ctx context.Context) { b.o.reject(ctx, b.k, b.e.version) }

// Secrets implements SecretHolder: the access token, the client secret
// and private key, and what the request that obtained the token in this
// process sent and received besides (refresh tokens, the JWT assertion).
func (b *bearerApplier) Secrets() []secrets.Secret {
	out := make([]secrets.Secret, 0, 3+len(b.e.fetched))
	out = append(out, b.e.access)
	out = append(out, b.e.fetched...)
	for _, s := range []secrets.Secret{b.c.clientSecret, b.c.privateKey} {
		if !s.IsZero() {
			out = append(out, s)
		}
	}
	return out
}

// Format implements fmt.Formatter without the token.
func (b *bearerApplier) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "auth.bearerApplier{%s}", secrets.Redacted)
}

// LogValue implements slog.LogValuer.
func (b *bearerApplier) LogValue() slog.Value { return slog.StringValue("bearer " + secrets.Redacted) }

// SecretHolder is an Applier that can say which secret values a call's
// credentials involve (an access token, a key, refresh tokens, a client
// secret, a JWT assertion, a private key), so that the caller redacts them
// from whatever comes back.
type SecretHolder interface {
	Secrets() []secrets.Secret
}

// Rejecter is an Applier whose credential the upstream may refuse (HTTP
// 401). Reject drops it, so that the next Build obtains a new one; the
// gateway then retries the call once.
type Rejecter interface {
	Reject(ctx context.Context)
}

func (o *OAuth) applier(ctx context.Context, k grantKey, c *clientConfig, fetch fetchFunc) (registry.Applier, error) {
	e, err := o.token(ctx, k, fetch)
	switch {
	case errors.Is(err, errNoGrant):
		return nil, errNoGrant
	case errors.Is(err, errReconnect):
		return nil, o.reconnectErr(ctx, k)
	case err != nil:
		return nil, err
	}
	return &bearerApplier{e: e, c: c, o: o, k: k}, nil
}

func (o *OAuth) clientCredentialsMode(ctx context.Context, in ModeInput) (registry.Applier, error) {
	c, err := o.clientFor(ctx, in)
	if err != nil {
		return nil, err
	}
	if c.clientSecret.IsZero() {
		return nil, reconnect(FieldClientSecret)
	}
	k := o.key(in, c, "")
	return o.applier(ctx, k, c, func(ctx context.Context, _ secrets.Secret) (*oauth2.Token, error) {
		return o.clientCredentials(ctx, c)
	})
}

// subjectGrant resolves the instance's client and the grant of the
// principal's subject user, who must be named.
func (o *OAuth) subjectGrant(ctx context.Context, in ModeInput) (*clientConfig, grantKey, error) {
	user := in.Principal.Subject()
	if user == "" {
		return nil, grantKey{}, errNoUser
	}
	c, err := o.clientFor(ctx, in)
	if err != nil {
		return nil, grantKey{}, err
	}
	return c, o.key(in, c, user), nil
}

// userMode is oauth and oauthCentral: the call's subject user's grant.
func (o *OAuth) userMode(ctx context.Context, in ModeInput) (registry.Applier, error) {
	c, k, err := o.subjectGrant(ctx, in)
	if err != nil {
		return nil, err
	}
	a, err := o.applier(ctx, k, c, func(ctx context.Context, refresh secrets.Secret) (*oauth2.Token, error) {
		return o.refresh(ctx, c, refresh)
	})
	if errors.Is(err, errNoGrant) {
		if in.Principal.OnBehalf() {
			return nil, errUserNotFound
		}
		return nil, o.reconnectErr(ctx, k)
	}
	return a, err
}

// userConnected is the connection check of oauth and oauthCentral: nil
// when the call's subject user has a grant not marked reconnect_required
// (warm in this process, else in the store), else what userMode would
// answer: user_not_found acting on behalf of a user never connected,
// reconnect_required otherwise, whose connectUrl is the instance's
// connect route (a check mints no single-use link; a call does).
func (o *OAuth) userConnected(ctx context.Context, in ModeInput) error {
	_, k, err := o.subjectGrant(ctx, in)
	if err != nil {
		return err
	}
	o.mu.RLock()
	e := o.mem[k.fp]
	o.mu.RUnlock()
	if e != nil && !e.reconnect {
		return nil
	}
	g, err := o.store.Grant(ctx, k.id())
	switch {
	case err != nil:
		return err
	case g != nil && g.Status == StatusActive:
		return nil
	case g == nil && in.Principal.OnBehalf():
		return errUserNotFound
	}
	refused := switchboard.E(switchboard.ErrUnauthorized, StatusReconnectRequired,
		"the user has not connected this app, or their connection expired or was revoked; the user connects by opening connectUrl")
	refused.ConnectURL = o.ConnectURL(k.tenantSlug, k.instance.Slug)
	return refused
}

func (o *OAuth) jwtMode(ctx context.Context, in ModeInput) (registry.Applier, error) {
	c, err := o.clientFor(ctx, in)
	if err != nil {
		return nil, err
	}
	// The assertion's subject is the call's user, else the instance's
	// JWT_SUBJECT; it is part of the grant's fingerprint either way.
	user := in.Principal.Subject()
	if user != "" {
		c.subject = user
	}
	k := o.key(in, c, user)
	return o.applier(ctx, k, c, func(ctx context.Context, _ secrets.Secret) (*oauth2.Token, error) {
		return o.jwtBearer(ctx, c)
	})
}
