package mcp_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/mcp"
	"github.com/switchboardhq/switchboard/server"
)

// authServer is a loopback OAuth authorization server: it publishes a JWKS
// and signs access tokens.
type authServer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newAuthServer(t testing.TB) *authServer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	as := &authServer{key: key}
	as.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks" {
			http.NotFound(w, r)
			return
		}
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{
			"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	}))
	t.Cleanup(as.srv.Close)
	return as
}

func (as *authServer) token(t testing.TB, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(as.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMCPAuthorization(t *testing.T) {
	t.Parallel()
	as := newAuthServer(t)
	issuer := as.srv.URL
	s := newStackWith(t, dbtest.SQLite(t), widgetsSpec, func(c *server.Config) {
		c.MCPAuthServers, c.MCPJWKSURL, c.MCPScopes = []string{issuer}, issuer+"/jwks", []string{"mcp"}
	})
	callerTok := s.tenant(t, "acme", canaryA, "agent-1", "desktop-client")
	s.install(t, "acme", "attic", canaryA, "desktop-client")
	srv := s.srv
	instance := srv.URL + "/workspaces/acme/webhooks/shop.mcp"
	other := srv.URL + "/workspaces/acme/webhooks/attic.mcp"
	now := time.Now()
	claims := func(mut func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": issuer, "sub": "user-42", "aud": instance, "exp": now.Add(time.Hour).Unix(),
			"iat": now.Unix(), "client_id": "desktop-client", "scope": "mcp offline"}
		if mut != nil {
			mut(c)
		}
		return c
	}
	call := toolsCall("widgets", map[string]any{"action": "get", "id": "w1"})
	post := func(url, token string) rawResponse {
		return s.post(t, url, token, "", call)
	}

	t.Run("metadata", func(t *testing.T) {
		resp, err := http.Get(srv.URL + mcp.WellKnownPrefix + "/workspaces/acme/webhooks/shop.mcp")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var md mcp.ProtectedResourceMetadata
		json.NewDecoder(resp.Body).Decode(&md)
		if resp.StatusCode != 200 || md.Resource != instance || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != issuer {
			t.Errorf("metadata: %d %+v", resp.StatusCode, md)
		}
	})

	t.Run("unauthenticated is 401 with resource_metadata", func(t *testing.T) {
		r := post(instance, "")
		want := fmt.Sprintf(`Bearer resource_metadata=%q`, srv.URL+mcp.WellKnownPrefix+"/workspaces/acme/webhooks/shop.mcp")
		if r.status != 401 || r.header.Get("WWW-Authenticate") != want {
			t.Errorf("%d %q", r.status, r.header.Get("WWW-Authenticate"))
		}
	})

	t.Run("the right token works and never reaches the upstream", func(t *testing.T) {
		tok := as.token(t, claims(nil))
		r := post(instance, tok)
		if r.status != 200 || !strings.Contains(r.body, `owner\": \"acme`) || strings.Contains(r.body, `"isError":true`) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		s.up.mu.Lock()
		defer s.up.mu.Unlock()
		for _, a := range s.up.authSeen {
			if strings.Contains(a, tok) || strings.Contains(a, "Bearer ey") {
				t.Errorf("the upstream saw the access token")
			}
		}
	})

	for _, tc := range []struct {
		name   string
		url    string
		token  string
		status int
		code   string
	}{
		{"wrong audience", instance, as.token(t, claims(func(c jwt.MapClaims) { c["aud"] = "https://elsewhere.example/mcp" })), 401, "invalid_token"},
		{"another instance's token", instance, as.token(t, claims(func(c jwt.MapClaims) { c["aud"] = other })), 401, "invalid_token"},
		{"expired", instance, as.token(t, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() })), 401, "invalid_token"},
		{"no expiry", instance, as.token(t, claims(func(c jwt.MapClaims) { delete(c, "exp") })), 401, "invalid_token"},
		// Another issuer's JWT is not an access token of ours: it is
		// checked as a caller credential, and refused.
		{"wrong issuer", instance, as.token(t, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), 401, "unauthorized"},
		{"insufficient scope", instance, as.token(t, claims(func(c jwt.MapClaims) { c["scope"] = "offline" })), 403, "insufficient_scope"},
		{"client not on the allowlist", instance, as.token(t, claims(func(c jwt.MapClaims) { c["client_id"] = "stranger" })), 403, "agent_not_allowed"},
		{"the other instance with its own token", other, as.token(t, claims(func(c jwt.MapClaims) { c["aud"] = other })), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.up.hits.Load()
			r := post(tc.url, tc.token)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.status == 200 {
				return
			}
			if _, code := rpcRefusal(t, r); code != tc.code {
				t.Errorf("code %s, want %s", code, tc.code)
			}
			if tc.status == 401 && !strings.Contains(r.header.Get("WWW-Authenticate"), "resource_metadata=") {
				t.Errorf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
			}
			if tc.code == "insufficient_scope" && !strings.Contains(r.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
				t.Errorf("WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
			}
			if s.up.hits.Load() != before {
				t.Error("a refused token reached the upstream")
			}
			if strings.Contains(r.body, tc.token) {
				t.Error("the response repeats the token")
			}
		})
	}

	t.Run("caller credentials keep working", func(t *testing.T) {
		if r := s.post(t, instance, callerTok, "agent-1", call); r.status != 200 {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
}

func TestOriginProtection(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, dbtest.SQLite(t), widgetsSpec, func(c *server.Config) { c.MCPAllowedOrigins = []string{"https://app.example.com"} })
	tok := s.tenant(t, "acme", canaryA, "agent-1")
	srv := s.srv
	for _, tc := range []struct {
		origin, host string
		status       int
	}{
		{"", "", 200},
		{"https://app.example.com", "", 200},
		{"https://evil.example.com", "", 403},
		{"null", "", 403},
		{"", "evil.example.com", 403}, // DNS rebinding: loopback listener, foreign Host
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/workspaces/acme/webhooks/shop.mcp", strings.NewReader(string(toolsCall("widgets", map[string]any{"action": "get", "id": "w1"}))))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Agent-Id", "agent-1")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("origin %q host %q: %d, want %d", tc.origin, tc.host, resp.StatusCode, tc.status)
		}
	}
}
