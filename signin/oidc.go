package signin

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// Paths of OpenID Connect sign-in.
const (
	// OIDCStartPath starts a sign-in: GET ?tenant=<slug>[&issuer=<name>]
	// [&next=<local path>] redirects to the issuer; signed in, the browser
	// goes to next.
	OIDCStartPath = "/signin/oidc/start"
	// OIDCCallbackPath is the redirect URI registered at every issuer.
	OIDCCallbackPath = "/signin/oidc/callback"
)

// oidcFlowLifetime bounds the time between start and callback.
const oidcFlowLifetime = 10 * time.Minute

// OIDCIssuer is an OpenID Connect provider people sign in with.
type OIDCIssuer struct {
	// Name identifies the issuer in sign-in URLs (?issuer=); the first
	// configured issuer is the default.
	Name string
	// Issuer is the issuer identifier (its discovery document lives at
	// Issuer + "/.well-known/openid-configuration").
	Issuer       string
	ClientID     string
	ClientSecret secrets.Secret
}

// TenantLookup finds a tenant by slug (tenants.Service and tenants.Store).
type TenantLookup interface {
	Tenant(ctx context.Context, slug string) (*tenants.Tenant, error)
}

// OIDCConfig turns on OpenID Connect sign-in.
type OIDCConfig struct {
	Issuers []OIDCIssuer
	// Domains maps a tenant's slug to the email domains whose verified
	// addresses may join it as members by signing in. A tenant not
	// listed is invitation only: only its existing members sign in.
	Domains map[string][]string
	// Tenants resolves the tenant a sign-in is for.
	Tenants TenantLookup
	// HTTPClient reaches the issuers (discovery, token, JWKS).
	HTTPClient *http.Client
}

// oidcIssuer is one configured issuer, discovered on first use (and
// again after a failure), so that a provider down at start-up does not
// stop the server.
type oidcIssuer struct {
	cfg OIDCIssuer

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

var (
	errOIDCOff = switchboard.E(switchboard.ErrNotFound, "oidc_not_configured",
		"sign-in with an identity provider is not configured on this server; ask for a sign-in link")
	errOIDCFailed = switchboard.E(switchboard.ErrUnauthorized, "oidc_failed",
		"the identity provider's answer could not be verified; start the sign-in again")
	errNotMember = switchboard.E(switchboard.ErrForbidden, "not_a_member",
		"this account is not a member of the tenant; ask its owner for an invitation")
)

// discover returns the issuer's provider and ID token verifier. The
// verifier checks the signature against the issuer's JWKS (cached;
// fetched again when a token names an unknown key, so rotation works),
// the issuer, the audience (the client id) and the expiry.
func (i *oidcIssuer) discover(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.provider != nil {
		return i.provider, i.verifier, nil
	}
	p, err := oidc.NewProvider(ctx, i.cfg.Issuer)
	if err != nil {
		return nil, nil, switchboard.E(switchboard.ErrUnavailable, "oidc_unavailable",
			"the identity provider %s cannot be reached; try again later", i.cfg.Name).WithCause(err)
	}
	i.provider, i.verifier = p, p.Verifier(&oidc.Config{ClientID: i.cfg.ClientID})
	return i.provider, i.verifier, nil
}

// oidcFlow is what the browser keeps between start and callback, in a
// short-lived cookie: nothing in it is secret from the browser, and the
// state in it must equal the state the issuer sends back, which binds the
// callback to the browser that started (login CSRF).
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Tenant   string `json:"t"`
	Issuer   string `json:"i"`
	// Next is where the browser goes once signed in (SafeNext).
	Next string `json:"x,omitempty"`
}

func (h *Handler) flowCookie() string {
	if h.secure {
		return "__Secure-sb_oidc"
	}
	return "sb_oidc"
}

func (h *Handler) oauthConfig(i *oidcIssuer, p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: i.cfg.ClientID, ClientSecret: i.cfg.ClientSecret.Reveal(), Endpoint: p.Endpoint(),
		RedirectURL: strings.TrimRight(h.cfg.PublicURL, "/") + OIDCCallbackPath,
		Scopes:      []string{oidc.ScopeOpenID, "email"},
	}
}

func (h *Handler) issuer(name string) (*oidcIssuer, error) {
	if len(h.issuers) == 0 {
		return nil, errOIDCOff
	}
	if name == "" {
		return h.issuers[0], nil
	}
	for _, i := range h.issuers {
		if i.cfg.Name == name {
			return i, nil
		}
	}
	return nil, switchboard.E(switchboard.ErrNotFound, "oidc_not_configured", "no identity provider named %q", clip(name))
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

func (h *Handler) oidcContext(ctx context.Context) context.Context {
	if h.cfg.OIDC.HTTPClient != nil {
		return oidc.ClientContext(ctx, h.cfg.OIDC.HTTPClient)
	}
	return ctx
}

// oidcStart redirects the browser to the issuer with a fresh state,
// nonce and PKCE challenge (S256).
func (h *Handler) oidcStart(w http.ResponseWriter, r *http.Request) {
	ctx := h.oidcContext(r.Context())
	i, err := h.issuer(r.URL.Query().Get("issuer"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	t, err := h.cfg.OIDC.Tenants.Tenant(ctx, r.URL.Query().Get("tenant"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, _, err := i.discover(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	flow := oidcFlow{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), Tenant: t.Slug, Issuer: i.cfg.Name,
		Next: SafeNext(r.URL.Query().Get(NextParam))}
	b, _ := json.Marshal(flow)
	http.SetCookie(w, &http.Cookie{Name: h.flowCookie(), Value: base64.RawURLEncoding.EncodeToString(b), Path: "/signin/oidc/",
		MaxAge: int(oidcFlowLifetime / time.Second), HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
	url := h.oauthConfig(i, p).AuthCodeURL(flow.State, oidc.Nonce(flow.Nonce), oauth2.S256ChallengeOption(flow.Verifier))
	http.Redirect(w, r, url, http.StatusFound)
}

// randomString is 256 random bits, URL-safe.
func randomString() string { return tenants.NewToken("") }

// oidcCallback completes a sign-in: it checks the state against the
// browser's flow cookie, exchanges the code (with the PKCE verifier),
// verifies the ID token (signature, issuer, audience, expiry, nonce) and
// signs the verified email's member in, adding them as a member when the
// tenant admits their email domain.
func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	ctx := h.oidcContext(r.Context())
	flow, err := h.readFlow(r)
	// The flow cookie is spent whatever happens next.
	http.SetCookie(w, &http.Cookie{Name: h.flowCookie(), Value: "", Path: "/signin/oidc/", MaxAge: -1,
		HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		h.fail(w, r, switchboard.E(switchboard.ErrUnauthorized, "oidc_failed", "the identity provider refused the sign-in (%s)", clip(e)))
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(flow.State)) != 1 {
		h.fail(w, r, switchboard.E(switchboard.ErrUnauthorized, "oidc_failed", "the sign-in's state does not match this browser's; start again"))
		return
	}
	i, err := h.issuer(flow.Issuer)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, verifier, err := i.discover(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	tok, err := h.oauthConfig(i, p).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		h.fail(w, r, errOIDCFailed.WithCause(fmt.Errorf("exchanging the code: %w", err)))
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		h.fail(w, r, errOIDCFailed.WithCause(errors.New("no id_token in the token response")))
		return
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		h.fail(w, r, errOIDCFailed.WithCause(fmt.Errorf("verifying the ID token: %w", err)))
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(flow.Nonce)) != 1 {
		h.fail(w, r, errOIDCFailed.WithCause(errors.New("the ID token's nonce is not this sign-in's")))
		return
	}
	var claims struct {
		Email    string `json:"email"`
		Verified bool   `json:"email_verified"`
	}
	if err := idt.Claims(&claims); err != nil || claims.Email == "" || !claims.Verified {
		h.fail(w, r, switchboard.E(switchboard.ErrForbidden, "not_a_member",
			"the identity provider did not vouch for an email address (email_verified); ask for a sign-in link"))
		return
	}
	m, err := h.oidcMember(r.Context(), flow.Tenant, i, claims.Email)
	h.signIn(w, r, m, err, flow.Next)
}

// oidcMember returns the tenant's member with email, adding them (role
// member) when the tenant admits the email's domain.
func (h *Handler) oidcMember(ctx context.Context, slug string, i *oidcIssuer, email string) (members.Member, error) {
	t, err := h.cfg.OIDC.Tenants.Tenant(ctx, slug)
	if err != nil {
		return members.Member{}, err
	}
	m, err := h.cfg.Members.MemberByEmail(ctx, t.ID, email)
	if switchboard.CodeOf(err) != "member_not_found" {
		return m, err
	}
	addr, _ := members.NormalizeEmail(email)
	_, domain, _ := strings.Cut(addr, "@")
	for _, d := range h.cfg.OIDC.Domains[t.Slug] {
		if domain != "" && strings.EqualFold(d, domain) {
			m, err = h.cfg.Members.AddMember(ctx, "oidc:"+i.cfg.Name, t.ID, addr, members.RoleMember)
			if switchboard.CodeOf(err) == "member_exists" { // joined concurrently
				return h.cfg.Members.MemberByEmail(ctx, t.ID, addr)
			}
			return m, err
		}
	}
	return members.Member{}, errNotMember
}

func (h *Handler) readFlow(r *http.Request) (oidcFlow, error) {
	bad := switchboard.E(switchboard.ErrUnauthorized, "oidc_failed",
		"this sign-in was not started in this browser, or took longer than %s; start again", oidcFlowLifetime)
	c, err := r.Cookie(h.flowCookie())
	if err != nil || len(c.Value) > 4096 {
		return oidcFlow{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return oidcFlow{}, bad
	}
	var f oidcFlow
	if err := json.Unmarshal(b, &f); err != nil || f.State == "" || f.Nonce == "" || f.Verifier == "" {
		return oidcFlow{}, bad
	}
	return f, nil
}
