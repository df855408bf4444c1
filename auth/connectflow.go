package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// Flow is an authorization-code flow just started by Connect.
type Flow struct {
	// AuthorizeURL is where the user's browser goes to consent. It carries
	// the state and the S256 PKCE challenge.
	AuthorizeURL string
	// Binding is the browser-binding value to set as the cookie
	// CookieName on the browser that goes to AuthorizeURL; the callback
	// must present it.
	Binding    string
	CookieName string
	ExpiresAt  time.Time
}

// BindingCookieName is the name of the cookie that binds the flow of
// state to the browser that started it.
func BindingCookieName(state string) string { return "sb_oauth_" + hashHex(state)[:16] }

// FlowState is a consumed state: what the callback finishes.
type FlowState struct {
	Tenant       switchboard.TenantID
	TenantSlug   string
	InstanceID   switchboard.InstanceID
	InstanceSlug string
	User         string
	Mode         string
	Fingerprint  string
	TokenURL     string
	RedirectURI  string
	verifier     secrets.Secret
	stateHash    string
	bindingHash  string
	expiresAt    time.Time
}

// Errors of the callback. None of them says more than needed.
var (
	ErrStateInvalid = switchboard.E(switchboard.ErrInvalid, "invalid_state",
		"the sign-in link is invalid, was already used, or has expired; start connecting again")
	errNotOAuth = switchboard.E(switchboard.ErrInvalid, "not_oauth",
		"this app instance does not use a per-user OAuth mode (oauth or oauthCentral)")
	errClientChanged = switchboard.E(switchboard.ErrConflict, "client_changed",
		"the app's OAuth client or scopes changed while connecting; start connecting again")
)

func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashHex(s string) string {
	h := sha256.Sum256([]byte("switchboard oauth v1\x00" + s))
	return hex.EncodeToString(h[:])
}

// RedirectURI is the exact redirect URI of an instance: the platform's
// central callback for oauthCentral, the instance's own callback for
// oauth.
func (o *OAuth) RedirectURI(mode, tenantSlug, instanceSlug string) string {
	if mode == registry.ModeOAuthCentral {
		return o.publicURL + CentralCallbackPath
	}
	return o.publicURL + "/workspaces/" + url.PathEscape(tenantSlug) + "/webhooks/" + url.PathEscape(instanceSlug) + "/oauth/callback"
}

func userFlowCheck(in ModeInput) error {
	if m := in.Instance.AuthMode; m != registry.ModeOAuth && m != registry.ModeOAuthCentral {
		return errNotOAuth
	}
	return nil
}

// userGrant resolves the client and the grant of the principal's subject
// user on a per-user OAuth instance.
func (o *OAuth) userGrant(ctx context.Context, in ModeInput) (*clientConfig, grantKey, error) {
	if err := userFlowCheck(in); err != nil {
		return nil, grantKey{}, err
	}
	return o.subjectGrant(ctx, in)
}

// Connect starts an authorization-code flow with PKCE (S256) for the
// principal's subject user: it stores a single-use state bound to tenant,
// instance and user, expiring within 10 minutes, with the PKCE verifier
// and the token endpoint, and returns the authorize URL.
func (o *OAuth) Connect(ctx context.Context, in ModeInput) (*Flow, error) {
	c, k, err := o.userGrant(ctx, in)
	if err != nil {
		return nil, err
	}
	if c.authorizeURL == "" {
		return nil, reconnect(FieldAuthorizeURL)
	}
	user := k.user
	state, binding, verifier := randomToken(32), randomToken(32), oauth2.GenerateVerifier()
	now := o.now()
	expires := now.Add(o.stateTTL)
	redirect := o.RedirectURI(c.mode, in.Principal.TenantSlug, in.Instance.Slug)
	fs := &FlowState{Tenant: in.Tenant, TenantSlug: in.Principal.TenantSlug, InstanceID: in.Instance.ID, InstanceSlug: in.Instance.Slug,
		User: user, Mode: c.mode, Fingerprint: k.fp, TokenURL: c.tokenURL, RedirectURI: redirect,
		stateHash: hashHex(state), bindingHash: hashHex(binding), expiresAt: expires}
	if err := o.store.StartFlow(ctx, fs, secrets.New(verifier), now); err != nil {
		return nil, err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	for name, vs := range c.authParams {
		if len(vs) > 0 {
			opts = append(opts, oauth2.SetAuthURLParam(name, vs[0]))
		}
	}
	return &Flow{AuthorizeURL: c.oauth2Config(redirect).AuthCodeURL(state, opts...), Binding: binding,
		CookieName: BindingCookieName(state), ExpiresAt: expires}, nil
}

// Callback names the callback a state arrives at: an instance's own
// (/workspaces/{tenant}/webhooks/{instance}/oauth/callback), or, with both
// fields empty, the platform's central one.
type Callback struct {
	TenantSlug   string
	InstanceSlug string
}

// ConsumeState takes the flow of state, once: a missing, unknown, used
// or expired state, a browser binding that does not match, or a state
// issued for another callback than cb is ErrStateInvalid. The state is
// spent either way.
func (o *OAuth) ConsumeState(ctx context.Context, state, binding string, cb Callback) (*FlowState, error) {
	if state == "" || len(state) > 256 {
		return nil, ErrStateInvalid
	}
	fs, err := o.store.ConsumeFlow(ctx, hashHex(state))
	if err != nil {
		return nil, err
	}
	if !o.now().Before(fs.expiresAt) {
		return nil, ErrStateInvalid
	}
	if binding == "" || subtle.ConstantTimeCompare([]byte(hashHex(binding)), []byte(fs.bindingHash)) != 1 {
		return nil, ErrStateInvalid
	}
	want := o.publicURL + CentralCallbackPath
	if cb != (Callback{}) {
		want = o.RedirectURI(registry.ModeOAuth, cb.TenantSlug, cb.InstanceSlug)
	}
	if fs.RedirectURI != want {
		return nil, ErrStateInvalid
	}
	return fs, nil
}

// Finish exchanges the code of a consumed flow at the token endpoint
// recorded when the flow started, with the PKCE verifier, and stores the
// user's grant: the refresh token as a user-scope secret row whose name
// carries the fingerprint. in is the instance as it is now; a change of
// client or scopes since the flow started is errClientChanged.
func (o *OAuth) Finish(ctx context.Context, fs *FlowState, in ModeInput, code string) error {
	if err := userFlowCheck(in); err != nil {
		return err
	}
	if code == "" || len(code) > 4096 {
		return ErrStateInvalid
	}
	c, err := o.clientFor(ctx, in)
	if err != nil {
		return err
	}
	in.Principal = &Principal{Tenant: fs.Tenant, TenantSlug: fs.TenantSlug, UserID: fs.User}
	k := o.key(in, c, fs.User)
	if k.fp != fs.Fingerprint || c.mode != fs.Mode {
		return errClientChanged
	}
	c.tokenURL = fs.TokenURL
	cfg := c.oauth2Config(fs.RedirectURI)
	o.tokenRequests.Add(1)
	tok, err := cfg.Exchange(o.httpContext(ctx), code, oauth2.VerifierOption(fs.verifier.Reveal()))
	if err != nil {
		o.metrics.Token(c.mode, "code", tokenErrorCode(asTokenError(err)))
		return tokenError(asTokenError(err))
	}
	o.metrics.Token(c.mode, "code", "ok")
	if tok.AccessToken == "" {
		return tokenError(&tokenEndpointError{code: "unexpected_response"})
	}
	now := o.now()
	access, expiry := secrets.New(tok.AccessToken), expiryOf(tok, now)
	version, err := o.store.ConnectGrant(ctx, k.id(), secrets.New(tok.RefreshToken), access, expiry, now)
	if err != nil {
		return fmt.Errorf("storing the grant: %w", err)
	}
	o.remember(k.fp, &cachedToken{access: access, issued: now, expiry: expiry, version: version, fetched: inPlay(tok, secrets.Secret{})})
	return nil
}

// GrantStatus is a user's connection to an instance.
type GrantStatus struct {
	Connected bool      `json:"connected"`
	Status    string    `json:"status"`
	User      string    `json:"user"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Scopes are the scopes the instance's client asks for, normalised.
	Scopes []string `json:"scopes,omitempty"`
	// ExpiresAt is when the grant's access token expires (it is refreshed
	// on use); zero when the user is not connected.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// ConnectURL is where the user (re)connects.
	ConnectURL string `json:"connect_url,omitempty"`
}

// Status returns the subject user's connection to the instance with its
// current client and scopes.
func (o *OAuth) Status(ctx context.Context, in ModeInput) (*GrantStatus, error) {
	c, k, err := o.userGrant(ctx, in)
	if err != nil {
		return nil, err
	}
	user := k.user
	st := &GrantStatus{User: user, Status: "not_connected", Scopes: strings.Fields(c.scopes),
		ConnectURL: o.ConnectURL(in.Principal.TenantSlug, in.Instance.Slug)}
	g, err := o.store.Grant(ctx, k.id())
	if err != nil {
		return nil, err
	}
	if g == nil {
		return st, nil
	}
	st.Status, st.UpdatedAt, st.Connected = g.Status, g.UpdatedAt, g.Status == StatusActive
	if st.Connected {
		st.ConnectURL, st.ExpiresAt = "", g.ExpiresAt
	}
	return st, nil
}

// Disconnected is what a disconnect did at the provider.
type Disconnected struct {
	// Revoked is set when the provider's revocation endpoint accepted the
	// grant's token.
	Revoked bool
	// RevokeFailed is the error code of a revocation the provider did not
	// accept or could not be asked ("unreachable", "timeout",
	// "unexpected_response", ...); the grant was deleted all the same.
	RevokeFailed string
}

// Disconnect revokes the subject user's tokens at the provider where its
// connector declares a revocation endpoint (the refresh token, which
// takes its access tokens with it, or the access token when there is no
// refresh token), and deletes the user's grants and token rows of the
// instance (every fingerprint). Revocation is best effort: a provider
// that fails does not keep the grant; the failure is logged (by code,
// never with the token) and returned for the caller to audit.
func (o *OAuth) Disconnect(ctx context.Context, in ModeInput) (Disconnected, error) {
	var out Disconnected
	c, k, err := o.userGrant(ctx, in)
	if err != nil {
		return out, err
	}
	user := k.user
	tok, hint := secrets.Secret{}, ""
	for _, kind := range []string{tokenRefresh, tokenAccess} {
		if t, err := o.store.Token(ctx, k.id(), kind); err == nil && !t.IsZero() {
			tok, hint = t, kind
			break
		}
	}
	if c.revokeURL != "" && !tok.IsZero() {
		if err := o.revoke(ctx, c, tok, hint); err != nil {
			out.RevokeFailed = tokenErrorCode(err)
			if out.RevokeFailed == "" {
				out.RevokeFailed = "unexpected_response"
			}
			o.logger.Warn("revoking at the provider failed; deleting the grant anyway", "code", out.RevokeFailed)
		} else {
			out.Revoked = true
		}
	}
	// Other replicas drop their cached tokens of the grant too: the
	// deletion announces it.
	fps, err := o.store.DeleteUserGrants(ctx, in.Tenant, in.Instance.ID, user, k.fp)
	if err != nil {
		return out, err
	}
	o.forget(k.fp)
	for _, fp := range fps {
		o.forget(fp)
	}
	return out, nil
}

// MarkGrants notes where the change log stands, before any token is
// cached: the listener's first connection then replays the grant changes
// made since instead of dropping every cached token.
func (o *OAuth) MarkGrants(ctx context.Context) error { return o.grants.Mark(ctx) }

// Listen drops the cached tokens of grants that other replicas disconnect
// or reconnect, until ctx is done. After every connection of its listener
// it replays the grant changes logged since the last one heard (or since
// MarkGrants); only when it cannot does it drop every cached token. It
// returns at once on the embedded store. Run it in its own goroutine.
func (o *OAuth) Listen(ctx context.Context, onError func(error)) {
	o.grants.Listen(ctx, func(payload string) {
		var c grantChange
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			o.dropAll()
			return
		}
		for _, fp := range c.Fingerprints {
			o.forget(fp)
		}
	}, o.dropAll, onError)
}

// dropAll forgets every cached token.
func (o *OAuth) dropAll() {
	o.mu.Lock()
	clear(o.mem)
	o.mu.Unlock()
}
