package signin

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	// OIDCStartPath starts a sign-in: GET [?issuer=<name>][&tenant=<slug>]
	// [&next=<local path>] redirects to the issuer; signed in, the browser
	// goes to next. Without tenant, the person signs in to the one tenant
	// their verified email is a member of (or, failing that, the one
	// tenant that admits its domain).
	OIDCStartPath = "/signin/oidc/start"
	// OIDCCallbackPath is the redirect URI of an unnamed issuer (the
	// one-issuer configuration); a named issuer's is
	// OIDCCallbackPath + "/" + name (OIDCIssuer.CallbackPath).
	OIDCCallbackPath = "/signin/oidc/callback"
)

// oidcFlowLifetime bounds the time between start and callback.
const oidcFlowLifetime = 10 * time.Minute

// OIDCIssuer is an OpenID Connect provider people sign in with.
type OIDCIssuer struct {
	// Name identifies the issuer in sign-in URLs (?issuer=), its callback
	// path and its flow cookie: letters, digits, - and _. It may be empty
	// only when it is the one issuer configured. The first configured
	// issuer is the default.
	Name string
	// Label is what the sign-in button says after "Sign in with"; empty,
	// the name (or, unnamed, the issuer's host).
	Label string
	// Issuer is the issuer identifier (its discovery document lives at
	// Issuer + "/.well-known/openid-configuration").
	Issuer       string
	ClientID     string
	ClientSecret secrets.Secret
}

// CallbackPath is the issuer's redirect URI path, registered at the
// issuer. Each issuer has its own, so that the callback knows which
// issuer's flow it completes before reading anything the browser sent
// (an answer of one issuer delivered to another's callback is refused).
func (i OIDCIssuer) CallbackPath() string {
	if i.Name == "" {
		return OIDCCallbackPath
	}
	return OIDCCallbackPath + "/" + i.Name
}

// label is the issuer's button text.
func (i OIDCIssuer) label() string {
	switch {
	case i.Label != "":
		return i.Label
	case i.Name != "":
		return i.Name
	}
	if u, err := url.Parse(i.Issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return "your identity provider"
}

// ValidIssuerName reports whether name may name an issuer.
func ValidIssuerName(name string) bool {
	if name == "" || len(name) > 40 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// IssuerLink is one configured issuer as a sign-in button shows it.
type IssuerLink struct {
	// Name is the issuer's label ("Sign in with <Name>").
	Name string
	// StartURL starts a sign-in with the issuer (a path under the public
	// URL); add tenant= and next= query parameters as needed.
	StartURL string
}

// Issuers lists the configured issuers, the default first, for sign-in
// buttons.
func (h *Handler) Issuers() []IssuerLink {
	out := make([]IssuerLink, 0, len(h.issuers))
	for _, i := range h.issuers {
		u := OIDCStartPath
		if i.cfg.Name != "" {
			u += "?" + url.Values{"issuer": {i.cfg.Name}}.Encode()
		}
		out = append(out, IssuerLink{Name: i.cfg.label(), StartURL: u})
	}
	return out
}

// StartURLFor is the path that starts a sign-in with link's issuer for
// tenant (may be empty) and next (a local path, may be empty).
func (l IssuerLink) StartURLFor(tenant, next string) string {
	u, err := url.Parse(l.StartURL)
	if err != nil {
		return l.StartURL
	}
	q := u.Query()
	if tenant != "" {
		q.Set("tenant", tenant)
	}
	if next = SafeNext(next); next != "" {
		q.Set(NextParam, next)
	}
	u.RawQuery = q.Encode()
	return u.String()
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

// flowCookie is the name of the cookie of a flow with issuer name: one
// per issuer, so that flows started with two issuers in one browser do
// not overwrite each other, and a callback reads only its own issuer's.
func (h *Handler) flowCookie(name string) string {
	c := "sb_oidc"
	if name != "" {
		c += "_" + name
	}
	if h.secure {
		return "__Secure-" + c
	}
	return c
}

func (h *Handler) oauthConfig(i *oidcIssuer, p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: i.cfg.ClientID, ClientSecret: i.cfg.ClientSecret.Reveal(), Endpoint: p.Endpoint(),
		RedirectURL: strings.TrimRight(h.cfg.PublicURL, "/") + i.cfg.CallbackPath(),
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
	tenant := ""
	if slug := r.URL.Query().Get("tenant"); slug != "" {
		t, err := h.cfg.OIDC.Tenants.Tenant(ctx, slug)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		tenant = t.Slug
	}
	p, _, err := i.discover(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	flow := oidcFlow{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), Tenant: tenant, Issuer: i.cfg.Name,
		Next: SafeNext(r.URL.Query().Get(NextParam))}
	b, _ := json.Marshal(flow)
	http.SetCookie(w, &http.Cookie{Name: h.flowCookie(i.cfg.Name), Value: base64.RawURLEncoding.EncodeToString(b), Path: "/signin/oidc/",
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
//
// The callback's path names the issuer (OIDCIssuer.CallbackPath): only
// that issuer's flow cookie is read, the flow must have been started with
// it, and the code is exchanged and the ID token verified against it
// alone, so an issuer's answer can never complete another issuer's flow.
func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	ctx := h.oidcContext(r.Context())
	name := r.PathValue("issuer")
	i, err := h.issuer(name)
	if err == nil && i.cfg.Name != name { // the unnamed path of a named issuer
		err = switchboard.E(switchboard.ErrNotFound, "oidc_not_configured", "this is not the callback of a configured identity provider")
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	flow, err := h.readFlow(r, name)
	// The flow cookie is spent whatever happens next.
	http.SetCookie(w, &http.Cookie{Name: h.flowCookie(name), Value: "", Path: "/signin/oidc/", MaxAge: -1,
		HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
	if err == nil && flow.Issuer != name {
		err = errFlowMismatch
	}
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
	// The session remembers the verified identity (issuer and subject),
	// which the tenant picker switches by; see members.Identity.
	h.signIn(w, r, m, members.Identity{Issuer: idt.Issuer, Subject: idt.Subject}, err, flow.Next)
}

// oidcMember returns the tenant's member with email, adding them (role
// member) when the tenant admits the email's domain. Without a tenant
// (slug ""), it is the one tenant the email is a member of, else the one
// tenant that admits its domain.
func (h *Handler) oidcMember(ctx context.Context, slug string, i *oidcIssuer, email string) (members.Member, error) {
	if slug == "" {
		var err error
		if slug, err = h.oidcTenant(ctx, email); slug == "" || err != nil {
			return members.Member{}, err
		}
	}
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

var errFlowMismatch = switchboard.E(switchboard.ErrUnauthorized, "oidc_failed",
	"this answer is not from the identity provider this sign-in was started with; start again")

var errSeveralTenants = switchboard.E(switchboard.ErrConflict, "tenant_required",
	"this account may sign in to several tenants: start the sign-in from your tenant's sign-in page (/signin/?tenant=<your tenant>)")

// oidcTenant is the tenant a sign-in without one is for: the one the
// verified email is a member of; if none, the one that admits its domain.
// It returns "" and member_not_found when there is none.
func (h *Handler) oidcTenant(ctx context.Context, email string) (string, error) {
	ms, err := h.cfg.Members.Memberships(ctx, email)
	if err != nil {
		return "", err
	}
	switch len(ms) {
	case 0:
	case 1:
		return ms[0].TenantSlug, nil
	default:
		return "", errSeveralTenants
	}
	addr, _ := members.NormalizeEmail(email)
	_, domain, _ := strings.Cut(addr, "@")
	var admitting []string
	for slug, ds := range h.cfg.OIDC.Domains {
		for _, d := range ds {
			if domain != "" && strings.EqualFold(d, domain) {
				admitting = append(admitting, slug)
				break
			}
		}
	}
	switch len(admitting) {
	case 0:
		return "", errNotMember
	case 1:
		return admitting[0], nil
	}
	return "", errSeveralTenants
}

func (h *Handler) readFlow(r *http.Request, issuer string) (oidcFlow, error) {
	bad := switchboard.E(switchboard.ErrUnauthorized, "oidc_failed",
		"this sign-in was not started in this browser, or took longer than %s; start again", oidcFlowLifetime)
	c, err := r.Cookie(h.flowCookie(issuer))
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
