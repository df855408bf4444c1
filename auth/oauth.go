package auth

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
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
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// Well-known field names the token-based modes read from an app instance's
// fields (each its own secret row). A connector that offers a mode
// declares the fields it needs in its manifest's env.
const (
	FieldClientID     = "CLIENT_ID"
	FieldClientSecret = "CLIENT_SECRET"
	FieldAuthorizeURL = "AUTHORIZE_URL"
	FieldTokenURL     = "TOKEN_URL"
	FieldRevokeURL    = "REVOKE_URL"
	// FieldScopes holds space- or comma-separated scopes; without it the
	// manifest's auth.scopes, then the provider's defaults apply.
	FieldScopes = "SCOPES"
	// FieldAudience is sent as the audience parameter of a
	// client-credentials request.
	FieldAudience = "AUDIENCE"
	// FieldAuthParams holds extra authorize parameters, URL-encoded
	// ("access_type=offline&prompt=consent").
	FieldAuthParams = "AUTH_PARAMS"
	FieldJWTIssuer  = "JWT_ISSUER"
	// FieldJWTSubject is the assertion's subject when the call names no
	// user.
	FieldJWTSubject  = "JWT_SUBJECT"
	FieldJWTAudience = "JWT_AUDIENCE"
	// FieldPrivateKey is a PEM private key (RSA or ECDSA) that signs JWT
	// assertions; FieldPrivateKeyID its key id (kid), if the server wants
	// one.
	FieldPrivateKey   = "PRIVATE_KEY"
	FieldPrivateKeyID = "PRIVATE_KEY_ID"
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
	// Skew is how long before its expiry a token counts as stale;
	// default 30 s.
	Skew time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
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
	db        *database.DB
	secrets   *secrets.Store
	providers *Providers
	client    *http.Client
	publicURL string
	logger    *slog.Logger
	stateTTL  time.Duration
	skew      time.Duration
	now       func() time.Time

	mu  sync.RWMutex
	mem map[string]*cachedToken
	sf  singleflight.Group

	tokenRequests atomic.Int64
}

type cachedToken struct {
	access  secrets.Secret
	expiry  time.Time
	version int64
	// reconnect marks a grant that needs the user to reconnect, until
	// until (then the store is read again).
	reconnect bool
	until     time.Time
}

// NewOAuth returns the token-based modes over cfg.
func NewOAuth(cfg OAuthConfig) *OAuth {
	o := &OAuth{db: cfg.DB, secrets: cfg.Secrets, providers: cfg.Providers, client: cfg.HTTPClient,
		publicURL: strings.TrimRight(cfg.PublicURL, "/"), logger: cfg.Logger, stateTTL: cfg.StateTTL, skew: cfg.Skew,
		now: cfg.Now, mem: map[string]*cachedToken{}}
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
	a.Register(registry.ModeJWT, o.jwtMode)
}

// TokenRequests returns how many requests this process sent to token
// endpoints.
func (o *OAuth) TokenRequests() int64 { return o.tokenRequests.Load() }

// PublicURL is the server's public base URL.
func (o *OAuth) PublicURL() string { return o.publicURL }

// clientConfig is what a mode needs to obtain tokens for an instance.
type clientConfig struct {
	mode         string
	provider     string
	clientID     secrets.Secret
	clientSecret secrets.Secret
	authorizeURL string
	tokenURL     string
	revokeURL    string
	scopes       string // normalised
	audience     string
	authParams   url.Values
	authStyle    oauth2.AuthStyle
	// jwt
	issuer     string
	subject    string
	jwtAud     string
	privateKey secrets.Secret
	keyID      string
}

// field returns an instance field's value, or its declared default.
func field(in ModeInput, name string) secrets.Secret {
	if v, ok := in.Fields[name]; ok && !v.IsZero() {
		return v
	}
	if f, ok := in.Manifest.Field(name); ok && f.Default != "" {
		return secrets.New(f.Default)
	}
	return secrets.Secret{}
}

func fieldText(in ModeInput, name string) string { return field(in, name).Reveal() }

// clientFor resolves the instance's client configuration for its mode:
// oauthCentral from the platform provider registry; oauth from the
// instance's fields, with the provider registry's endpoints as defaults;
// clientCredentials and jwt from the instance's fields.
func (o *OAuth) clientFor(ctx context.Context, in ModeInput) (*clientConfig, error) {
	m := in.Manifest
	c := &clientConfig{mode: in.Instance.AuthMode, provider: m.Auth.Provider}
	var p *Provider
	if c.mode == registry.ModeOAuthCentral || (c.mode == registry.ModeOAuth && c.provider != "" && o.providers != nil) {
		if c.provider == "" {
			return nil, badConfig(m, "mode oauthCentral needs auth.provider")
		}
		if o.providers == nil {
			return nil, errNoProvider
		}
		var err error
		p, err = o.providers.Get(ctx, c.provider)
		if err != nil && (c.mode == registry.ModeOAuthCentral || !errors.Is(err, switchboard.ErrNotFound)) {
			return nil, err
		}
	}
	scopes := fieldText(in, FieldScopes)
	if scopes == "" && len(m.Auth.Scopes) > 0 {
		scopes = strings.Join(m.Auth.Scopes, " ")
	}
	if p != nil {
		c.authorizeURL, c.tokenURL, c.revokeURL = p.AuthorizeURL, p.TokenURL, p.RevokeURL
		c.authParams = p.AuthParams
		c.authStyle = authStyle(p.AuthStyle)
		if scopes == "" {
			scopes = strings.Join(p.Scopes, " ")
		}
	}
	c.scopes = NormaliseScopes(scopes)
	if c.mode == registry.ModeOAuthCentral {
		c.clientID, c.clientSecret = p.ClientID, p.ClientSecret
		if c.clientID.IsZero() {
			return nil, switchboard.E(switchboard.ErrUnavailable, "provider_not_configured",
				"the platform has no OAuth client for provider %s yet", c.provider)
		}
	} else {
		c.clientID, c.clientSecret = field(in, FieldClientID), field(in, FieldClientSecret)
		for name, dst := range map[string]*string{FieldAuthorizeURL: &c.authorizeURL, FieldTokenURL: &c.tokenURL, FieldRevokeURL: &c.revokeURL} {
			if v := fieldText(in, name); v != "" {
				*dst = v
			}
		}
		if v := fieldText(in, FieldAuthParams); v != "" {
			if q, err := url.ParseQuery(v); err == nil {
				c.authParams = q
			}
		}
	}
	c.audience = fieldText(in, FieldAudience)
	if c.mode == registry.ModeJWT {
		c.issuer = fieldText(in, FieldJWTIssuer)
		c.subject = fieldText(in, FieldJWTSubject)
		c.jwtAud = fieldText(in, FieldJWTAudience)
		c.privateKey = field(in, FieldPrivateKey)
		c.keyID = fieldText(in, FieldPrivateKeyID)
		if c.jwtAud == "" {
			c.jwtAud = c.tokenURL
		}
		if c.issuer == "" {
			return nil, reconnect(FieldJWTIssuer)
		}
		if c.privateKey.IsZero() {
			return nil, reconnect(FieldPrivateKey)
		}
	} else if c.clientID.IsZero() {
		return nil, reconnect(FieldClientID)
	}
	if c.tokenURL == "" {
		return nil, reconnect(FieldTokenURL)
	}
	if err := validURL(FieldTokenURL, c.tokenURL, true); err != nil {
		return nil, badConfig(m, "the token URL is not an absolute http(s) URL")
	}
	return c, nil
}

// grantKey identifies one cached token.
type grantKey struct {
	tenant     switchboard.TenantID
	tenantSlug string
	instance   *tenants.Instance
	user       string
	mode       string
	fp         string
	// perUser grants exist only after the user connected (oauth modes).
	perUser bool
}

// Fingerprint is the token-cache key of (tenant, instance, client id,
// normalised scopes, user, mode, token URL).
func Fingerprint(tenant switchboard.TenantID, instance switchboard.InstanceID, clientID, scopes, user, mode, tokenURL string) string {
	h := sha256.New()
	for _, s := range []string{"switchboard grant v1", string(tenant), string(instance), clientID, NormaliseScopes(scopes), user, mode, tokenURL} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func (o *OAuth) key(in ModeInput, c *clientConfig, user string) grantKey {
	id := c.clientID.Reveal()
	if c.mode == registry.ModeJWT {
		id = c.issuer
	}
	slug := ""
	if in.Principal != nil {
		slug = in.Principal.TenantSlug
	}
	return grantKey{tenant: in.Tenant, tenantSlug: slug, instance: in.Instance, user: user, mode: c.mode,
		fp:      Fingerprint(in.Tenant, in.Instance.ID, id, c.scopes, user, c.mode, c.tokenURL),
		perUser: c.mode == registry.ModeOAuth || c.mode == registry.ModeOAuthCentral}
}

func grantOwner(instance switchboard.InstanceID, user string) string {
	return "grant:" + string(instance) + ":" + user
}

func (k grantKey) ref(name string) secrets.Ref {
	return secrets.Ref{Tenant: k.tenant, Owner: grantOwner(k.instance.ID, k.user), Name: k.fp + ":" + name}
}

// ConnectURL is where a user (re)connects an oauth or oauthCentral
// instance.
func (o *OAuth) ConnectURL(tenantSlug, instanceSlug string) string {
	return o.publicURL + "/workspaces/" + url.PathEscape(tenantSlug) + "/webhooks/" + url.PathEscape(instanceSlug) + "/oauth/connect"
}

func (o *OAuth) reconnectErr(k grantKey) error {
	return switchboard.E(switchboard.ErrUnauthorized, StatusReconnectRequired,
		"the user's connection to this app is missing, expired or revoked; reconnect at %s", o.ConnectURL(k.tenantSlug, k.instance.Slug))
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

func (o *OAuth) fresh(expiry, now time.Time) bool { return now.Add(o.skew).Before(expiry) }

// fetchFunc obtains a new token; refresh is the stored refresh token of a
// per-user grant.
type fetchFunc func(ctx context.Context, refresh secrets.Secret) (*oauth2.Token, error)

// token returns a fresh access token for k: from memory when warm, else
// from the store, else from the token endpoint under the refresh lock.
func (o *OAuth) token(ctx context.Context, k grantKey, fetch fetchFunc) (secrets.Secret, int64, error) {
	now := o.now()
	o.mu.RLock()
	e := o.mem[k.fp]
	o.mu.RUnlock()
	if e != nil {
		if e.reconnect && now.Before(e.until) {
			return secrets.Secret{}, 0, errReconnect
		}
		if !e.reconnect && o.fresh(e.expiry, now) {
			return e.access, e.version, nil
		}
	}
	v, err, _ := o.sf.Do(k.fp, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return o.obtain(ctx, k, fetch)
	})
	if err != nil {
		return secrets.Secret{}, 0, err
	}
	e = v.(*cachedToken)
	return e.access, e.version, nil
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

type grantRow struct {
	status  string
	version int64
	expires time.Time
}

func (o *OAuth) readGrant(ctx context.Context, q database.Querier, k grantKey, lock bool) (*grantRow, error) {
	query := `SELECT status, version, expires_at FROM auth_grants WHERE tenant_id = $1 AND fingerprint = $2`
	if lock && o.db.Dialect == "postgres" {
		// The embedded store's transactions hold its write lock already
		// (BEGIN IMMEDIATE); Postgres locks the row.
		query += ` FOR UPDATE`
	}
	var r grantRow
	err := q.QueryRowContext(ctx, query, string(k.tenant), k.fp).Scan(&r.status, &r.version, &r.expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading grant: %w", err)
	}
	return &r, nil
}

// obtain runs once per key at a time in this process.
func (o *OAuth) obtain(ctx context.Context, k grantKey, fetch fetchFunc) (*cachedToken, error) {
	now := o.now()
	o.mu.RLock()
	e := o.mem[k.fp]
	o.mu.RUnlock()
	if e != nil && !e.reconnect && o.fresh(e.expiry, now) {
		return e, nil
	}
	// Unlocked read: another replica, or this one before a restart, may
	// hold a fresh token.
	row, err := o.readGrant(ctx, o.db, k, false)
	if err != nil {
		return nil, err
	}
	if row == nil && k.perUser {
		return nil, errNoGrant
	}
	if row != nil && row.status == StatusReconnectRequired {
		o.remember(k.fp, &cachedToken{reconnect: true, until: now.Add(10 * time.Second)})
		return nil, errReconnect
	}
	if row != nil && o.fresh(row.expires, now) {
		if access, err := o.secrets.Get(ctx, k.ref("access_token")); err == nil {
			e := &cachedToken{access: access, expiry: row.expires, version: row.version}
			o.remember(k.fp, e)
			return e, nil
		}
	}
	return o.refreshLocked(ctx, k, fetch)
}

// refreshLocked takes the grant's lock, re-reads, and fetches a new token
// only if the stored one is still stale.
func (o *OAuth) refreshLocked(ctx context.Context, k grantKey, fetch fetchFunc) (*cachedToken, error) {
	var out *cachedToken
	var outErr error
	err := o.db.InTx(ctx, func(tx *sql.Tx) error {
		now := o.now()
		if !k.perUser {
			if _, err := tx.ExecContext(ctx, `INSERT INTO auth_grants (tenant_id, fingerprint, instance_id, user_id, mode, status, version, expires_at, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $7, $7) ON CONFLICT (tenant_id, fingerprint) DO NOTHING`,
				string(k.tenant), k.fp, string(k.instance.ID), k.user, k.mode, StatusActive, now); err != nil {
				return fmt.Errorf("creating grant: %w", err)
			}
		}
		row, err := o.readGrant(ctx, tx, k, true)
		if err != nil {
			return err
		}
		if row == nil {
			outErr = errNoGrant
			return nil
		}
		if row.status == StatusReconnectRequired {
			outErr = errReconnect
			return nil
		}
		if o.fresh(row.expires, now) {
			if access, err := o.secrets.Get(ctx, k.ref("access_token")); err == nil {
				out = &cachedToken{access: access, expiry: row.expires, version: row.version}
				return nil
			}
		}
		var refresh secrets.Secret
		if k.perUser {
			refresh, err = o.secrets.Get(ctx, k.ref("refresh_token"))
			if errors.Is(err, switchboard.ErrNotFound) {
				outErr = o.markReconnect(ctx, tx, k, now)
				return nil
			}
			if err != nil {
				return err
			}
		}
		o.tokenRequests.Add(1)
		tok, ferr := fetch(ctx, refresh)
		if ferr != nil {
			if k.perUser && tokenErrorCode(ferr) == "invalid_grant" {
				// Re-read: a changed token means another replica won.
				again, err := o.readGrant(ctx, tx, k, false)
				if err != nil {
					return err
				}
				if again != nil && again.version != row.version && o.fresh(again.expires, now) {
					if access, err := o.secrets.Get(ctx, k.ref("access_token")); err == nil {
						out = &cachedToken{access: access, expiry: again.expires, version: again.version}
						return nil
					}
				}
				outErr = o.markReconnect(ctx, tx, k, now)
				return nil
			}
			return tokenError(ferr)
		}
		e, err := o.store(ctx, tx, k, tok, refresh, row.version, now)
		if err != nil {
			return err
		}
		out = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	if outErr != nil {
		if errors.Is(outErr, errReconnect) {
			o.remember(k.fp, &cachedToken{reconnect: true, until: o.now().Add(10 * time.Second)})
		}
		return nil, outErr
	}
	o.remember(k.fp, out)
	return out, nil
}

func (o *OAuth) markReconnect(ctx context.Context, tx *sql.Tx, k grantKey, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE auth_grants SET status = $3, updated_at = $4 WHERE tenant_id = $1 AND fingerprint = $2`,
		string(k.tenant), k.fp, StatusReconnectRequired, now); err != nil {
		return fmt.Errorf("marking grant: %w", err)
	}
	o.logger.Info("grant needs reconnecting", "tenant", string(k.tenant), "instance", k.instance.Slug, "mode", k.mode)
	return errReconnect
}

// defaultLifetime is assumed for a token the server gave no expiry.
const defaultLifetime = time.Hour

// store writes a new token inside the locked transaction: the rotated
// refresh token first, then the access token and the row. It commits with
// the transaction, before the access token is used.
func (o *OAuth) store(ctx context.Context, tx *sql.Tx, k grantKey, tok *oauth2.Token, oldRefresh secrets.Secret, version int64, now time.Time) (*cachedToken, error) {
	if tok.AccessToken == "" {
		return nil, switchboard.E(switchboard.ErrUnavailable, "token_request_failed", "the token endpoint answered without an access token")
	}
	// The lifetime counts from this server's clock (golang.org/x/oauth2
	// stamps Expiry with the wall clock).
	expiry := now.Add(defaultLifetime)
	switch {
	case tok.ExpiresIn > 0:
		expiry = now.Add(time.Duration(tok.ExpiresIn) * time.Second)
	case !tok.Expiry.IsZero():
		expiry = now.Add(time.Until(tok.Expiry))
	}
	if k.perUser && tok.RefreshToken != "" && tok.RefreshToken != oldRefresh.Reveal() {
		if err := o.secrets.Write(ctx, tx, k.ref("refresh_token"), secrets.New(tok.RefreshToken)); err != nil {
			return nil, err
		}
	}
	access := secrets.New(tok.AccessToken)
	if err := o.secrets.Write(ctx, tx, k.ref("access_token"), access); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE auth_grants SET version = $3, expires_at = $4, status = $5, updated_at = $6
		WHERE tenant_id = $1 AND fingerprint = $2`, string(k.tenant), k.fp, version+1, expiry, StatusActive, now); err != nil {
		return nil, fmt.Errorf("updating grant: %w", err)
	}
	return &cachedToken{access: access, expiry: expiry, version: version + 1}, nil
}

// reject drops a token the upstream refused, here and in the store (if it
// is still the stored one), so that the next call obtains a new one.
func (o *OAuth) reject(ctx context.Context, k grantKey, version int64) {
	o.forget(k.fp)
	_, err := o.db.ExecContext(ctx, `UPDATE auth_grants SET expires_at = $4 WHERE tenant_id = $1 AND fingerprint = $2 AND version = $3`,
		string(k.tenant), k.fp, version, time.Unix(0, 0).UTC())
	if err != nil {
		o.logger.Warn("marking a refused token stale", "err", err.Error())
	}
}

// httpContext carries the egress client to golang.org/x/oauth2.
func (o *OAuth) httpContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, o.client)
}

// bearerApplier sends Authorization: Bearer <token>. Reject drops the
// token when the upstream refuses it.
type bearerApplier struct {
	token   secrets.Secret
	o       *OAuth
	k       grantKey
	version int64
}

// Apply implements registry.Applier.
func (b *bearerApplier) Apply(req *http.Request) error {
	v := b.token.Reveal()
	if strings.ContainsAny(v, "\r\n\x00") {
		return errBadCredentialValue
	}
	req.Header.Set("Authorization", "Bearer "+v)
	return nil
}

// Reject implements Rejecter.
func (b *bearerApplier) Reject(ctx context.Context) { b.o.reject(ctx, b.k, b.version) }

// Format implements fmt.Formatter without the token.
func (b *bearerApplier) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "auth.bearerApplier{%s}", secrets.Redacted)
}

// LogValue implements slog.LogValuer.
func (b *bearerApplier) LogValue() slog.Value { return slog.StringValue("bearer " + secrets.Redacted) }

// Rejecter is an Applier whose credential the upstream may refuse (HTTP
// 401). Reject drops it, so that the next Build obtains a new one; the
// gateway then retries the call once.
type Rejecter interface {
	Reject(ctx context.Context)
}

func (o *OAuth) applier(ctx context.Context, k grantKey, fetch fetchFunc) (registry.Applier, error) {
	tok, version, err := o.token(ctx, k, fetch)
	switch {
	case errors.Is(err, errNoGrant):
		return nil, errNoGrant
	case errors.Is(err, errReconnect):
		return nil, o.reconnectErr(k)
	case err != nil:
		return nil, err
	}
	return &bearerApplier{token: tok, o: o, k: k, version: version}, nil
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
	return o.applier(ctx, k, func(ctx context.Context, _ secrets.Secret) (*oauth2.Token, error) {
		return o.clientCredentials(ctx, c)
	})
}

// userMode is oauth and oauthCentral: the call's subject user's grant.
func (o *OAuth) userMode(ctx context.Context, in ModeInput) (registry.Applier, error) {
	user := in.Principal.Subject()
	if user == "" {
		return nil, errNoUser
	}
	c, err := o.clientFor(ctx, in)
	if err != nil {
		return nil, err
	}
	k := o.key(in, c, user)
	a, err := o.applier(ctx, k, func(ctx context.Context, refresh secrets.Secret) (*oauth2.Token, error) {
		return o.refresh(ctx, c, refresh)
	})
	if errors.Is(err, errNoGrant) {
		if in.Principal.OnBehalf() {
			return nil, errUserNotFound
		}
		return nil, o.reconnectErr(k)
	}
	return a, err
}

func (o *OAuth) jwtMode(ctx context.Context, in ModeInput) (registry.Applier, error) {
	c, err := o.clientFor(ctx, in)
	if err != nil {
		return nil, err
	}
	user := in.Principal.Subject()
	subject := user
	if subject == "" {
		subject = c.subject
	}
	k := o.key(in, c, user)
	return o.applier(ctx, k, func(ctx context.Context, _ secrets.Secret) (*oauth2.Token, error) {
		return o.jwtBearer(ctx, c, subject)
	})
}
