package auth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
)

// Provider is a platform OAuth provider: its endpoints, default scopes,
// extra authorize parameters and the platform's central client.
type Provider struct {
	Slug         string
	Name         string
	AuthorizeURL string
	TokenURL     string
	RevokeURL    string
	Scopes       []string
	// AuthParams are extra authorize parameters the provider needs, such
	// as access_type=offline or prompt=consent.
	AuthParams url.Values
	// AuthStyle is how the client authenticates at the token endpoint:
	// "header" (HTTP Basic, the default) or "params" (in the form).
	AuthStyle    string
	ClientID     secrets.Secret
	ClientSecret secrets.Secret
	Revision     int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// ProviderRequest is the desired state of a provider (PUT). A client id or
// secret that is absent keeps its stored value.
type ProviderRequest struct {
	Name         string            `json:"name"`
	AuthorizeURL string            `json:"authorize_url"`
	TokenURL     string            `json:"token_url"`
	RevokeURL    string            `json:"revoke_url,omitempty"`
	Scopes       []string          `json:"scopes,omitempty"`
	AuthParams   map[string]string `json:"auth_params,omitempty"`
	AuthStyle    string            `json:"auth_style,omitempty"`
	ClientID     *secrets.Secret   `json:"client_id,omitempty"`
	ClientSecret *secrets.Secret   `json:"client_secret,omitempty"`
	// Revision, when set, is the revision the write expects to replace
	// (0: the provider does not exist yet); another is a conflict.
	Revision *int64 `json:"revision,omitempty"`
}

// ProviderView is a provider as the admin API shows it: the client id and
// secret only as set / not set.
type ProviderView struct {
	Slug            string            `json:"slug"`
	Name            string            `json:"name"`
	AuthorizeURL    string            `json:"authorize_url"`
	TokenURL        string            `json:"token_url"`
	RevokeURL       string            `json:"revoke_url,omitempty"`
	Scopes          []string          `json:"scopes"`
	AuthParams      map[string]string `json:"auth_params,omitempty"`
	AuthStyle       string            `json:"auth_style"`
	ClientIDSet     bool              `json:"client_id_set"`
	ClientSecretSet bool              `json:"client_secret_set"`
	// CallbackURL is the platform's one redirect URI to register at the
	// provider for oauthCentral.
	CallbackURL string    `json:"callback_url"`
	Revision    int64     `json:"revision"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Providers is the platform provider registry. Providers are cached in
// memory and re-read after providerTTL, so that a change made on another
// replica is seen within it. While the store cannot be read, the last
// provider read is served (and the store tried again every
// providerRetry), so that warm per-user calls survive a database outage.
type Providers struct {
	store     *Store
	publicURL string
	now       func() time.Time

	mu    sync.RWMutex
	cache map[string]*cachedProvider
}

type cachedProvider struct {
	p      *Provider // nil: not registered
	loaded time.Time
}

const (
	providerTTL   = 30 * time.Second
	providerRetry = 5 * time.Second
)

// NewProviders returns the registry over db; publicURL is the server's
// public base URL, for the central callback URL.
func NewProviders(db *database.DB, s *secrets.Store, publicURL string) *Providers {
	return &Providers{store: NewStore(db, s), publicURL: strings.TrimRight(publicURL, "/"),
		now: func() time.Time { return time.Now().UTC() }, cache: map[string]*cachedProvider{}}
}

// SetClock replaces the registry's clock (time.Now), for tests that move
// time forward. Call it before the registry is used.
func (ps *Providers) SetClock(now func() time.Time) { ps.now = now }

// CentralCallbackPath is the path of the platform's one OAuth callback.
const CentralCallbackPath = "/oauth/callback"

// CallbackURL is the platform's central redirect URI.
func (ps *Providers) CallbackURL() string { return ps.publicURL + CentralCallbackPath }

// Names of a provider's secret rows.
const (
	pAuthorizeURL = "authorize_url"
	pTokenURL     = "token_url"
	pRevokeURL    = "revoke_url"
	pScopes       = "scopes"
	pAuthParams   = "auth_params"
	pAuthStyle    = "auth_style"
	pClientID     = "client_id"
	pClientSecret = "client_secret"
)

func validURL(field, v string, required bool) error {
	if v == "" {
		if required {
			return switchboard.E(switchboard.ErrInvalid, "invalid_provider", "%s is required", field)
		}
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return switchboard.E(switchboard.ErrInvalid, "invalid_provider", "%s must be an absolute http(s) URL without credentials or fragment", field)
	}
	return nil
}

// Put creates or replaces the provider slug, validating everything before
// writing anything.
func (ps *Providers) Put(ctx context.Context, slug string, req ProviderRequest) (*ProviderView, bool, error) {
	if !switchboard.ValidSlug(slug) {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_slug", "provider slug must be 1-63 lower-case letters, digits and single hyphens")
	}
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" {
		req.Name = slug
	}
	if len(req.Name) > 200 {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_provider", "name must be at most 200 characters")
	}
	if err := errors.Join(validURL("authorize_url", req.AuthorizeURL, true), validURL("token_url", req.TokenURL, true),
		validURL("revoke_url", req.RevokeURL, false)); err != nil {
		return nil, false, err
	}
	if req.AuthStyle != "" && req.AuthStyle != "header" && req.AuthStyle != "params" {
		return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_provider", "auth_style must be header or params")
	}
	params := url.Values{}
	for k, v := range req.AuthParams {
		switch k {
		case "state", "code_challenge", "code_challenge_method", "redirect_uri", "client_id", "response_type", "scope":
			return nil, false, switchboard.E(switchboard.ErrInvalid, "invalid_provider", "auth_params may not set %s", k)
		}
		params.Set(k, v)
	}
	scopes := NormaliseScopes(strings.Join(req.Scopes, " "))
	now := ps.now()
	values := map[string]string{pAuthorizeURL: req.AuthorizeURL, pTokenURL: req.TokenURL, pRevokeURL: req.RevokeURL,
		pScopes: scopes, pAuthParams: params.Encode(), pAuthStyle: req.AuthStyle}
	client := map[string]*secrets.Secret{pClientID: req.ClientID, pClientSecret: req.ClientSecret}
	created, err := ps.store.PutProvider(ctx, slug, req.Name, req.Revision, values, client, now)
	if errors.Is(err, switchboard.ErrConflict) {
		return nil, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("saving provider %s: %w", slug, err)
	}
	ps.forget(slug)
	p, err := ps.Get(ctx, slug)
	if err != nil {
		return nil, false, err
	}
	return ps.view(p), created, nil
}

func (ps *Providers) forget(slug string) {
	ps.mu.Lock()
	delete(ps.cache, slug)
	ps.mu.Unlock()
}

var errNoProvider = switchboard.E(switchboard.ErrNotFound, "provider_not_found", "no such OAuth provider is registered on this platform")

// Get returns the provider slug, from memory when loaded within the last
// 30 seconds.
func (ps *Providers) Get(ctx context.Context, slug string) (*Provider, error) {
	now := ps.now()
	ps.mu.RLock()
	c := ps.cache[slug]
	ps.mu.RUnlock()
	if c != nil && now.Sub(c.loaded) < providerTTL {
		if c.p == nil {
			return nil, errNoProvider
		}
		return c.p, nil
	}
	p, err := ps.load(ctx, slug)
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		if c == nil {
			return nil, err
		}
		// The store is failing: serve the last good answer and try again
		// in providerRetry.
		ps.mu.Lock()
		ps.cache[slug] = &cachedProvider{p: c.p, loaded: now.Add(providerRetry - providerTTL)}
		ps.mu.Unlock()
		if c.p == nil {
			return nil, errNoProvider
		}
		return c.p, nil
	}
	ps.mu.Lock()
	ps.cache[slug] = &cachedProvider{p: p, loaded: now}
	ps.mu.Unlock()
	if p == nil {
		return nil, errNoProvider
	}
	return p, nil
}

func (ps *Providers) load(ctx context.Context, slug string) (*Provider, error) {
	p, vals, err := ps.store.Provider(ctx, slug)
	if err != nil {
		return nil, err
	}
	p.AuthorizeURL = vals[pAuthorizeURL].Reveal()
	p.TokenURL = vals[pTokenURL].Reveal()
	p.RevokeURL = vals[pRevokeURL].Reveal()
	p.Scopes = strings.Fields(vals[pScopes].Reveal())
	p.AuthParams, _ = url.ParseQuery(vals[pAuthParams].Reveal())
	p.AuthStyle = vals[pAuthStyle].Reveal()
	p.ClientID = vals[pClientID]
	p.ClientSecret = vals[pClientSecret]
	return p, nil
}

func (ps *Providers) view(p *Provider) *ProviderView {
	v := &ProviderView{Slug: p.Slug, Name: p.Name, AuthorizeURL: p.AuthorizeURL, TokenURL: p.TokenURL, RevokeURL: p.RevokeURL,
		Scopes: p.Scopes, AuthStyle: p.AuthStyle, ClientIDSet: !p.ClientID.IsZero(), ClientSecretSet: !p.ClientSecret.IsZero(),
		CallbackURL: ps.CallbackURL(), Revision: p.Revision, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	if v.Scopes == nil {
		v.Scopes = []string{}
	}
	if v.AuthStyle == "" {
		v.AuthStyle = "header"
	}
	if len(p.AuthParams) > 0 {
		v.AuthParams = map[string]string{}
		for k := range p.AuthParams {
			v.AuthParams[k] = p.AuthParams.Get(k)
		}
	}
	return v
}

// View returns the provider slug as the admin API shows it.
func (ps *Providers) View(ctx context.Context, slug string) (*ProviderView, error) {
	ps.forget(slug)
	p, err := ps.Get(ctx, slug)
	if err != nil {
		return nil, err
	}
	return ps.view(p), nil
}

// List returns every provider, by slug.
func (ps *Providers) List(ctx context.Context) ([]*ProviderView, error) {
	return switchboard.All(func(q switchboard.PageQuery) ([]*ProviderView, string, error) { return ps.Page(ctx, q) })
}

// Page returns one page of the providers, by slug, and the cursor of the
// next page.
func (ps *Providers) Page(ctx context.Context, q switchboard.PageQuery) ([]*ProviderView, string, error) {
	slugs, next, err := ps.store.ProviderSlugsPage(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]*ProviderView, 0, len(slugs))
	for _, s := range slugs {
		v, err := ps.View(ctx, s)
		if err != nil {
			return nil, "", err
		}
		out = append(out, v)
	}
	return out, next, nil
}

// Delete removes the provider slug and its secret rows.
func (ps *Providers) Delete(ctx context.Context, slug string) error {
	err := ps.store.DeleteProvider(ctx, slug)
	ps.forget(slug)
	return err
}

// NormaliseScopes splits scopes on spaces and commas, drops duplicates and
// sorts them, and joins them with single spaces.
func NormaliseScopes(s string) string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' })
	sort.Strings(f)
	out := f[:0]
	for i, x := range f {
		if i == 0 || x != f[i-1] {
			out = append(out, x)
		}
	}
	return strings.Join(out, " ")
}

func authStyle(s string) oauth2.AuthStyle {
	if s == "params" {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}
