package mcp

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/tenants"
)

// Authorization makes every instance URL an OAuth 2.1 protected resource
// (MCP authorization): clients learn the authorization servers from the
// RFC 9728 metadata at /.well-known/oauth-protected-resource/<instance
// path>, and present JWT access tokens whose issuer is Issuer, whose
// signature verifies under a key of the issuer's JWKS, that have not
// expired, and whose audience is the instance URL. The token names the
// end user (sub) and the OAuth client (client_id, else azp), which is the
// agent the instance's allowlist must name. The token is never forwarded
// upstream: upstream credentials are the instance's, as for any caller.
// Caller credentials (API keys, platform-signed caller JWTs) keep working
// beside it.
type Authorization struct {
	// AuthorizationServers are the issuer URLs advertised in the metadata.
	AuthorizationServers []string
	// Issuer is the iss access tokens must carry; default the first
	// authorization server.
	Issuer string
	// JWKSURL is where the issuer's signing keys are published.
	JWKSURL string
	// Scopes, when set, must all be granted by a token (its "scope"
	// claim); a token without them is refused with 403 insufficient_scope.
	Scopes []string
	// HTTPClient fetches the JWKS; default a client with a 5 s timeout.
	HTTPClient *http.Client
	// Leeway tolerates clock skew; default 30 s.
	Leeway time.Duration

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey
	fetched time.Time
}

// issuer is the iss tokens must carry.
func (a *Authorization) issuer() string {
	if a.Issuer != "" {
		return a.Issuer
	}
	if len(a.AuthorizationServers) > 0 {
		return a.AuthorizationServers[0]
	}
	return ""
}

// ProtectedResourceMetadata is the RFC 9728 document of an instance URL.
type ProtectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// WellKnownPrefix is where the protected-resource metadata is served; the
// instance path follows it.
const WellKnownPrefix = "/.well-known/oauth-protected-resource"

// isTenantPath reports whether p is the tenant catalog endpoint's path,
// /workspaces/{tenant}/mcp.
func isTenantPath(p string) bool {
	rest, ok := strings.CutPrefix(p, prefix)
	if !ok {
		return false
	}
	tenant, ok := strings.CutSuffix(rest, "/mcp")
	return ok && switchboard.ValidSlug(tenant)
}

// ProtectedResourceHandler serves RFC 9728 metadata for every instance
// URL, GET /.well-known/oauth-protected-resource/workspaces/{tenant}/webhooks/{instance}.mcp,
// and for every tenant catalog endpoint's, .../workspaces/{tenant}/mcp.
// Mount it at WellKnownPrefix + "/". It touches no store: the document is
// the same whether or not the instance exists.
func ProtectedResourceHandler(opts Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, WellKnownPrefix)
		name := "Switchboard app instance"
		if _, _, ok := parsePath(path); !ok {
			if !isTenantPath(path) {
				http.NotFound(w, r)
				return
			}
			name = "Switchboard workspace catalog"
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		md := ProtectedResourceMetadata{
			Resource:               publicBase(opts.PublicURL, r) + path,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           name,
		}
		if opts.Authorization != nil {
			md.AuthorizationServers = opts.Authorization.AuthorizationServers
			md.ScopesSupported = opts.Authorization.Scopes
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		json.NewEncoder(w).Encode(md)
	})
}

// TenantAccessToken authenticates r to the tenant catalog endpoint
// (tenantmcp) as the instance endpoint does: when r's bearer token is an
// access token of opts' authorization server (ok true), it must verify for
// the endpoint's URL (its audience: the public URL + r's path), and the
// principal is its user and OAuth client (the agent, which each
// instance's allowlist must then name). ok is false for any other
// credential, which the caller authenticates as a caller credential.
func TenantAccessToken(ctx context.Context, opts Options, r *http.Request, tenant func() (*tenants.Tenant, error)) (p *auth.Principal, ok bool, err error) {
	az := opts.Authorization
	token, hasBearer := bearerToken(r)
	if !hasBearer || az == nil || !az.isOAuthToken(token) {
		return nil, false, nil
	}
	sub, client, err := az.verify(ctx, token, publicBase(opts.PublicURL, r)+r.URL.Path)
	if err != nil {
		return nil, true, err
	}
	if client == "" {
		return nil, true, switchboard.E(switchboard.ErrForbidden, "missing_agent_id", "the access token names no OAuth client (client_id)")
	}
	t, err := tenant()
	if err != nil {
		return nil, true, err
	}
	return accessTokenPrincipal(tenantInstance{tenantID: t.ID, tenantSlug: t.Slug}, sub, client), true, nil
}

// Challenge sets the WWW-Authenticate header of a refusal with status and
// code on r, as the instance endpoint does (RFC 6750 with the RFC 9728
// resource_metadata URL of r's path), for the tenant catalog endpoint.
func Challenge(opts Options, w http.ResponseWriter, r *http.Request, status int, code string) {
	(&handler{opts: opts}).challenge(w, r, status, code)
}

// publicBase is the configured public URL, else the request's origin.
func publicBase(configured string, r *http.Request) string {
	if configured != "" {
		return strings.TrimRight(configured, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Errors of access-token checks. Their text never repeats the token.
var (
	errTokenInvalid = switchboard.E(switchboard.ErrUnauthorized, "invalid_token", "the access token is invalid, expired, or not for this instance")
	errScope        = switchboard.E(switchboard.ErrForbidden, "insufficient_scope", "the access token does not grant the scope this instance requires")
)

// isOAuthToken reports whether token is a JWT whose (not yet verified)
// issuer is the authorization server's: such tokens are access tokens;
// every other credential is a caller credential.
func (a *Authorization) isOAuthToken(token string) bool {
	if a == nil || a.issuer() == "" || strings.Count(token, ".") != 2 {
		return false
	}
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(token, claims); err != nil {
		return false
	}
	iss, _ := claims["iss"].(string)
	return iss == a.issuer()
}

// verify checks an access token for the instance URL resource and returns
// the user (sub) and the OAuth client it names.
func (a *Authorization) verify(ctx context.Context, token, resource string) (sub, client string, err error) {
	leeway := a.Leeway
	if leeway == 0 {
		leeway = 30 * time.Second
	}
	claims := jwt.MapClaims{}
	_, err = jwt.NewParser(
		jwt.WithIssuer(a.issuer()),
		jwt.WithAudience(resource),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}),
	).ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return a.key(ctx, kid)
	})
	if err != nil {
		return "", "", errTokenInvalid
	}
	sub, _ = claims["sub"].(string)
	client, _ = claims["client_id"].(string)
	if client == "" {
		client, _ = claims["azp"].(string)
	}
	if sub == "" {
		return "", "", errTokenInvalid
	}
	if len(a.Scopes) > 0 {
		scope, _ := claims["scope"].(string)
		granted := strings.Fields(scope)
		for _, s := range a.Scopes {
			if !slices.Contains(granted, s) {
				return "", "", errScope
			}
		}
	}
	return sub, client, nil
}

// key returns the issuer's key kid, fetching the JWKS when it is unknown
// (at most every 30 s).
func (a *Authorization) key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if k, ok := a.lookup(kid); ok {
		return k, nil
	}
	if time.Since(a.fetched) < 30*time.Second && a.keys != nil {
		return nil, errors.New("unknown key")
	}
	keys, err := a.fetch(ctx)
	a.fetched = time.Now()
	if err != nil {
		return nil, err
	}
	a.keys = keys
	if k, ok := a.lookup(kid); ok {
		return k, nil
	}
	return nil, errors.New("unknown key")
}

func (a *Authorization) lookup(kid string) (crypto.PublicKey, bool) {
	if kid != "" {
		k, ok := a.keys[kid]
		return k, ok
	}
	if len(a.keys) == 1 {
		for _, k := range a.keys {
			return k, true
		}
	}
	return nil, false
}

func (a *Authorization) fetch(ctx context.Context) (map[string]crypto.PublicKey, error) {
	client := a.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the JWKS: status %d", resp.StatusCode)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, fmt.Errorf("decoding the JWKS: %w", err)
	}
	keys := map[string]crypto.PublicKey{}
	for i, raw := range set.Keys {
		kid, k, err := parseJWK(raw)
		if err != nil {
			continue // a key we cannot use is skipped
		}
		if kid == "" {
			kid = fmt.Sprintf("#%d", i)
		}
		keys[kid] = k
	}
	return keys, nil
}

// parseJWK reads an RSA, EC (P-256, P-384, P-521) or OKP (Ed25519) public
// key.
func parseJWK(raw []byte) (string, crypto.PublicKey, error) {
	var k struct {
		Kty, Kid, Use, Crv, N, E, X, Y string
	}
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", nil, err
	}
	if k.Use != "" && k.Use != "sig" {
		return "", nil, errors.New("not a signing key")
	}
	b64 := base64.RawURLEncoding.DecodeString
	switch k.Kty {
	case "RSA":
		n, err1 := b64(k.N)
		e, err2 := b64(k.E)
		if err1 != nil || err2 != nil || len(e) > 4 {
			return "", nil, errors.New("bad RSA key")
		}
		return k.Kid, &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return "", nil, errors.New("unsupported curve")
		}
		// RFC 7518 §6.2.1.2-3: x and y are the full coordinate length.
		size := (curve.Params().BitSize + 7) / 8
		x, err1 := b64(k.X)
		y, err2 := b64(k.Y)
		if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
			return "", nil, errors.New("bad EC key")
		}
		// The SEC 1 uncompressed point; parsing checks it is on the curve.
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
		if err != nil {
			return "", nil, errors.New("bad EC key: the point is not on the curve")
		}
		return k.Kid, pub, nil
	case "OKP":
		x, err := b64(k.X)
		if err != nil || k.Crv != "Ed25519" || len(x) != ed25519.PublicKeySize {
			return "", nil, errors.New("bad OKP key")
		}
		return k.Kid, ed25519.PublicKey(x), nil
	}
	return "", nil, errors.New("unsupported key type")
}

// accessTokenPrincipal is the principal of a verified access token for the
// instance t: the token's user, and its OAuth client as the agent. It is
// never trusted (no targetUserId).
func accessTokenPrincipal(t tenantInstance, sub, client string) *auth.Principal {
	return &auth.Principal{
		Tenant:     t.tenantID,
		TenantSlug: t.tenantSlug,
		Caller: &tenants.Caller{
			ID:       switchboard.CallerID("oauth:" + client),
			TenantID: t.tenantID,
			Name:     "OAuth client " + client,
			Kind:     tenants.KindAgentPlatform,
			AgentID:  client,
			UserID:   sub,
		},
		AgentID: client,
		UserID:  sub,
		Kind:    tenants.KindAgentPlatform,
	}
}

type tenantInstance struct {
	tenantID   switchboard.TenantID
	tenantSlug string
}
