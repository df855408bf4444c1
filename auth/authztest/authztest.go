// Package authztest is a real OAuth 2.0 authorization server for tests,
// built on github.com/ory/fosite and started on loopback: authorization
// code with PKCE (S256 enforced), client credentials, refresh tokens with
// rotation and reuse detection (presenting a used refresh token revokes
// the whole family), token revocation (RFC 7009) and the JWT bearer grant
// (RFC 7523), and OpenID Connect sign-in (ID tokens, discovery, JWKS with
// key rotation; see oidc.go). The JWT bearer grant is implemented here with golang-jwt
// rather than fosite's handler, whose client-less path does not fit.
//
// It counts token requests by grant type, so tests can assert how many
// refreshes Switchboard made. Import it from _test files only.
package authztest

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/storage"
)

// Client is an OAuth client registered at the server.
type Client struct {
	ID           string
	Secret       string
	RedirectURIs []string
	Scopes       []string
	// AuthMethod, when set, is the only token endpoint authentication the
	// client may use: client_secret_basic, client_secret_post or none (a
	// public client). Unset, it may use either secret method.
	AuthMethod string
}

// Issuer is a JWT bearer issuer (a service account): assertions signed by
// Key for any subject are accepted.
type Issuer struct {
	Issuer string
	Key    crypto.PublicKey
	Scopes []string
	// ClientID, when set, makes JWT bearer requests of this issuer
	// authenticate as that registered client (RFC 7523 §3.1), by the
	// client's AuthMethod.
	ClientID string
}

// Options configures a server.
type Options struct {
	// AccessTokenLifespan defaults to one hour.
	AccessTokenLifespan time.Duration
	Clients             []Client
	Issuers             []Issuer
}

// LoginHeader names the user the authorize endpoint signs in (the test's
// stand-in for a login page): requests to /authorize carry it.
const LoginHeader = "X-Test-Login"

// Browser is a user's browser for a connect flow: it keeps cookies and
// follows redirects, is signed in as login at this server (LoginHeader),
// and sends headers (a caller credential, a user header) to every other
// host.
func (s *Server) Browser(login string, headers map[string]string) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: browserTransport{as: s.URL, login: login, headers: headers}}
}

type browserTransport struct {
	as, login string
	headers   map[string]string
}

func (b browserTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if strings.HasPrefix(r.URL.String(), b.as) {
		r.Header.Set(LoginHeader, b.login)
	} else {
		for k, v := range b.headers {
			r.Header.Set(k, v)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Server is a running authorization server.
type Server struct {
	*httptest.Server
	provider fosite.OAuth2Provider
	store    *tracking
	lifespan time.Duration

	mu          sync.Mutex
	issued      []string
	counts      map[string]int
	issuers     map[string]Issuer
	jwtToks     map[string]jwtToken
	usedJTIs    map[string]bool
	signingKeys []*jose.JSONWebKey
	jwksFetches int
	revocations []Revocation
	failRevoke  bool
}

// Revocation is one request to the revocation endpoint (RFC 7009).
type Revocation struct {
	// Subject is the user the token was issued for ("" when the token
	// was unknown to the server).
	Subject string
	// Hint is the request's token_type_hint.
	Hint string
	// Status is the HTTP status the server answered.
	Status int
}

type jwtToken struct {
	subject string
	expires time.Time
	revoked bool
}

// tracking remembers each subject's request ids so that a test can revoke
// everything a user was issued.
type tracking struct {
	*storage.MemoryStore
	mu        sync.Mutex
	bySubject map[string]map[string]bool
}

func (t *tracking) note(req fosite.Requester) {
	sub := ""
	if s := req.GetSession(); s != nil {
		sub = s.GetSubject()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bySubject[sub] == nil {
		t.bySubject[sub] = map[string]bool{}
	}
	t.bySubject[sub][req.GetID()] = true
}

func (t *tracking) CreateRefreshTokenSession(ctx context.Context, sig, atSig string, req fosite.Requester) error {
	t.note(req)
	return t.MemoryStore.CreateRefreshTokenSession(ctx, sig, atSig, req)
}

func (t *tracking) CreateAccessTokenSession(ctx context.Context, sig string, req fosite.Requester) error {
	t.note(req)
	return t.MemoryStore.CreateAccessTokenSession(ctx, sig, req)
}

// New starts a server on loopback; it stops when the test ends.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.AccessTokenLifespan == 0 {
		opts.AccessTokenLifespan = time.Hour
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	s := &Server{counts: map[string]int{}, issuers: map[string]Issuer{}, jwtToks: map[string]jwtToken{},
		usedJTIs: map[string]bool{}, lifespan: opts.AccessTokenLifespan}
	s.store = &tracking{MemoryStore: storage.NewMemoryStore(), bySubject: map[string]map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/token", s.token)
	mux.HandleFunc("/revoke", s.revoke)
	mux.HandleFunc("/.well-known/openid-configuration", s.discovery)
	mux.HandleFunc("/jwks", s.jwks)
	s.signingKeys = []*jose.JSONWebKey{newSigningKey()}
	s.Server = httptest.NewServer(mux)
	tb.Cleanup(s.Close)
	cfg := &fosite.Config{
		AccessTokenLifespan:            opts.AccessTokenLifespan,
		RefreshTokenLifespan:           24 * time.Hour,
		AuthorizeCodeLifespan:          5 * time.Minute,
		GlobalSecret:                   secret,
		EnforcePKCE:                    true,
		EnablePKCEPlainChallengeMethod: false,
		RefreshTokenScopes:             []string{},
		TokenURL:                       s.URL + "/token",
		SendDebugMessagesToClients:     false,
		IDTokenIssuer:                  s.URL,
	}
	s.provider = compose.Compose(cfg, s.store, &compose.CommonStrategy{CoreStrategy: compose.NewOAuth2HMACStrategy(cfg),
		OpenIDConnectTokenStrategy: compose.NewOpenIDConnectStrategy(s.signingKey, cfg)},
		compose.OAuth2AuthorizeExplicitFactory,
		compose.OAuth2ClientCredentialsGrantFactory,
		compose.OAuth2RefreshTokenGrantFactory,
		compose.OAuth2TokenRevocationFactory,
		compose.OAuth2TokenIntrospectionFactory,
		compose.OAuth2PKCEFactory,
		compose.OpenIDConnectExplicitFactory,
	)
	for _, c := range opts.Clients {
		s.AddClient(c)
	}
	for _, i := range opts.Issuers {
		s.issuers[i.Issuer] = i
	}
	return s
}

// TokenURL, AuthorizeURL and RevokeURL are the server's endpoints.
func (s *Server) TokenURL() string     { return s.URL + "/token" }
func (s *Server) AuthorizeURL() string { return s.URL + "/authorize" }
func (s *Server) RevokeURL() string    { return s.URL + "/revoke" }

// AddClient registers (or replaces) a client.
func (s *Server) AddClient(c Client) {
	dc := &fosite.DefaultClient{
		ID: c.ID, RedirectURIs: c.RedirectURIs, Scopes: c.Scopes,
		GrantTypes:    []string{"authorization_code", "refresh_token", "client_credentials"},
		ResponseTypes: []string{"code"},
		Public:        c.AuthMethod == "none",
	}
	if !dc.Public {
		dc.Secret = mustHash(c.Secret)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.AuthMethod == "" {
		s.store.MemoryStore.Clients[c.ID] = dc
		return
	}
	s.store.MemoryStore.Clients[c.ID] = &fosite.DefaultOpenIDConnectClient{DefaultClient: dc, TokenEndpointAuthMethod: c.AuthMethod}
}

// AddIssuer registers (or replaces) a JWT bearer issuer, for example to
// rotate its key.
func (s *Server) AddIssuer(i Issuer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issuers[i.Issuer] = i
}

func mustHash(secret string) []byte {
	h, err := (&fosite.BCrypt{Config: &fosite.Config{HashCost: 4}}).Hash(context.Background(), []byte(secret))
	if err != nil {
		panic(err)
	}
	return h
}

// TokenRequests returns how many token requests of grantType arrived
// ("" for all).
func (s *Server) TokenRequests(grantType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if grantType == "" {
		n := 0
		for _, c := range s.counts {
			n += c
		}
		return n
	}
	return s.counts[grantType]
}

// RevokeSubject revokes every access and refresh token issued for sub.
func (s *Server) RevokeSubject(sub string) {
	ctx := context.Background()
	s.store.mu.Lock()
	ids := s.store.bySubject[sub]
	s.store.mu.Unlock()
	for id := range ids {
		_ = s.store.RevokeRefreshToken(ctx, id)
		_ = s.store.RevokeAccessToken(ctx, id)
	}
	s.mu.Lock()
	for k, t := range s.jwtToks {
		if t.subject == sub {
			t.revoked = true
			s.jwtToks[k] = t
		}
	}
	s.mu.Unlock()
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := s.provider.NewAuthorizeRequest(ctx, r)
	if err != nil {
		s.provider.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	user := r.Header.Get(LoginHeader)
	if user == "" {
		s.provider.WriteAuthorizeError(ctx, w, ar, fosite.ErrAccessDenied)
		return
	}
	for _, sc := range ar.GetRequestedScopes() {
		ar.GrantScope(sc)
	}
	var session fosite.Session = &fosite.DefaultSession{Subject: user, Username: user}
	if ar.GetRequestedScopes().Has("openid") {
		session = s.openIDSession(r, user)
	}
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, session)
	if err != nil {
		s.provider.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	s.provider.WriteAuthorizeResponse(ctx, w, ar, resp)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_ = r.ParseForm()
	gt := r.PostForm.Get("grant_type")
	s.mu.Lock()
	s.counts[gt]++
	s.mu.Unlock()
	if gt == "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		s.jwtBearer(w, r)
		return
	}
	ar, err := s.provider.NewAccessRequest(ctx, r, &fosite.DefaultSession{})
	if err != nil {
		s.provider.WriteAccessError(ctx, w, ar, err)
		return
	}
	if ar.GetGrantTypes().ExactOne("client_credentials") {
		for _, sc := range ar.GetRequestedScopes() {
			ar.GrantScope(sc)
		}
	}
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		s.provider.WriteAccessError(ctx, w, ar, err)
		return
	}
	s.mu.Lock()
	for _, k := range []string{"access_token", "refresh_token"} {
		if v, ok := resp.ToMap()[k].(string); ok && v != "" {
			s.issued = append(s.issued, v)
		}
	}
	s.mu.Unlock()
	s.provider.WriteAccessResponse(ctx, w, ar, resp)
}

// Issued returns every access and refresh token the server issued, for
// canary searches.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.issued...)
}

// Revocations returns the requests the revocation endpoint received, in
// order.
func (s *Server) Revocations() []Revocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Revocation(nil), s.revocations...)
}

// FailRevocations makes the revocation endpoint answer 503 to every
// request (and revoke nothing) while on is set.
func (s *Server) FailRevocations(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRevoke = on
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_ = r.ParseForm()
	rev := Revocation{Hint: r.PostForm.Get("token_type_hint"), Status: http.StatusOK}
	// Whose token it is, read before it is revoked.
	if _, ar, err := s.provider.IntrospectToken(ctx, r.PostForm.Get("token"), fosite.RefreshToken, &fosite.DefaultSession{}); err == nil {
		rev.Subject = ar.GetSession().GetSubject()
	} else if _, ar, err := s.provider.IntrospectToken(ctx, r.PostForm.Get("token"), fosite.AccessToken, &fosite.DefaultSession{}); err == nil {
		rev.Subject = ar.GetSession().GetSubject()
	}
	s.mu.Lock()
	failing := s.failRevoke
	if failing {
		rev.Status = http.StatusServiceUnavailable
	}
	s.revocations = append(s.revocations, rev)
	s.mu.Unlock()
	if failing {
		http.Error(w, "revocation unavailable", rev.Status)
		return
	}
	err := s.provider.NewRevocationRequest(ctx, r)
	if err != nil {
		s.mu.Lock()
		s.revocations[len(s.revocations)-1].Status = fosite.ErrorToRFC6749Error(err).CodeField
		s.mu.Unlock()
	}
	s.provider.WriteRevocationResponse(ctx, w, err)
}

func writeError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "refused by the test server"})
}

// jwtBearer is RFC 7523 §2.1: a JWT signed by a registered issuer's key,
// with the token URL as audience, at most 5 minutes of life and a jti not
// seen before.
func (s *Server) jwtBearer(w http.ResponseWriter, r *http.Request) {
	assertion := r.PostForm.Get("assertion")
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(assertion, claims, func(t *jwt.Token) (any, error) {
		iss, _ := claims["iss"].(string)
		s.mu.Lock()
		i, ok := s.issuers[iss]
		s.mu.Unlock()
		if !ok {
			return nil, fosite.ErrInvalidClient
		}
		if i.ClientID != "" {
			c, err := s.provider.(*fosite.Fosite).AuthenticateClient(r.Context(), r, r.PostForm)
			if err != nil || c.GetID() != i.ClientID {
				return nil, fosite.ErrInvalidClient
			}
		}
		return i.Key, nil
	}, jwt.WithAudience(s.TokenURL()), jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
		jwt.WithValidMethods([]string{"RS256", "ES256", "ES384", "ES512"}))
	if errors.Is(err, fosite.ErrInvalidClient) {
		writeError(w, "invalid_client")
		return
	}
	if err != nil || !tok.Valid {
		writeError(w, "invalid_grant")
		return
	}
	exp, _ := claims.GetExpirationTime()
	iat, _ := claims.GetIssuedAt()
	if iat == nil || exp.Sub(iat.Time) > 5*time.Minute {
		writeError(w, "invalid_grant")
		return
	}
	jti, _ := claims["jti"].(string)
	sub, _ := claims["sub"].(string)
	iss, _ := claims["iss"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	if jti == "" || s.usedJTIs[jti] {
		writeError(w, "invalid_grant")
		return
	}
	s.usedJTIs[jti] = true
	if sub == "" {
		sub = iss
	}
	b := make([]byte, 24)
	rand.Read(b)
	access := "jwtat_" + hex.EncodeToString(b)
	s.jwtToks[access] = jwtToken{subject: sub, expires: time.Now().Add(s.lifespan)}
	s.issued = append(s.issued, access)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(map[string]any{"access_token": access, "token_type": "bearer", "expires_in": int(s.lifespan.Seconds()),
		"scope": r.PostForm.Get("scope")})
}

// Validate checks the request's bearer access token and returns the user
// it was issued for (the client id for client credentials).
func (s *Server) Validate(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || token == "" {
		return "", false
	}
	s.mu.Lock()
	jt, isJWT := s.jwtToks[token]
	s.mu.Unlock()
	if isJWT {
		return jt.subject, !jt.revoked && time.Now().Before(jt.expires)
	}
	_, ar, err := s.provider.IntrospectToken(r.Context(), token, fosite.AccessToken, &fosite.DefaultSession{})
	if err != nil {
		return "", false
	}
	if sub := ar.GetSession().GetSubject(); sub != "" {
		return sub, true
	}
	return ar.GetClient().GetID(), true
}

// API is a vendor API for tests (a resource server): a request bearing
// one of the authorization server's valid access tokens gets
// {"user": <the token's subject>}, any other 401. It records whom it
// answered, in order.
type API struct {
	*httptest.Server
	mu  sync.Mutex
	saw []string
}

// NewAPI starts an API that accepts s's access tokens; it stops when the
// test ends.
func (s *Server) NewAPI(tb testing.TB) *API {
	tb.Helper()
	a := &API{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub, ok := s.Validate(r)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		a.mu.Lock()
		a.saw = append(a.saw, sub)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"user": sub})
	}))
	tb.Cleanup(a.Close)
	return a
}

// Saw returns the subjects whose tokens the API accepted, in order.
func (a *API) Saw() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.saw...)
}
