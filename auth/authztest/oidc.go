package authztest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v3"
	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/openid"
	"github.com/ory/fosite/token/jwt"
)

// EmailVerifiedHeader, set to "false" on a request to /authorize, makes
// the ID token say the login's email is not verified.
const EmailVerifiedHeader = "X-Test-Email-Verified"

// OpenID Connect: with the "openid" scope, the authorization code grant
// also returns an ID token (fosite's OpenID Connect explicit handler),
// signed with the server's current RSA key, whose subject is
// "sub:"+login and whose email is the login. The server publishes its
// discovery document (Issuer()+"/.well-known/openid-configuration") and
// its signing keys (JWKSURL()).

// Issuer is the server's OpenID Connect issuer identifier (its URL).
func (s *Server) Issuer() string { return s.URL }

// JWKSURL is where the server publishes its signing keys.
func (s *Server) JWKSURL() string { return s.URL + "/jwks" }

// JWKSRequests returns how many times the signing keys were fetched.
func (s *Server) JWKSRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jwksFetches
}

// RotateSigningKey signs every later ID token with a new key (a new kid).
// The JWKS keeps publishing the earlier keys unless dropOld is set.
func (s *Server) RotateSigningKey(dropOld bool) {
	k := newSigningKey()
	s.mu.Lock()
	defer s.mu.Unlock()
	if dropOld {
		s.signingKeys = nil
	}
	s.signingKeys = append(s.signingKeys, k)
}

func newSigningKey() *jose.JSONWebKey {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	id := make([]byte, 8)
	rand.Read(id)
	return &jose.JSONWebKey{Key: key, KeyID: hex.EncodeToString(id), Algorithm: string(jose.RS256), Use: "sig"}
}

// signingKey is fosite's key getter: the newest key.
func (s *Server) signingKey(context.Context) (interface{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signingKeys[len(s.signingKeys)-1], nil
}

// openIDSession is the session of a login that asked for "openid".
func (s *Server) openIDSession(r *http.Request, user string) fosite.Session {
	k, _ := s.signingKey(r.Context())
	now := time.Now().UTC()
	return &openid.DefaultSession{
		Claims: &jwt.IDTokenClaims{
			Subject: "sub:" + user, Issuer: s.Issuer(), AuthTime: now, RequestedAt: now,
			Extra: map[string]interface{}{"email": user, "email_verified": r.Header.Get(EmailVerifiedHeader) != "false"},
		},
		Headers:  &jwt.Headers{Extra: map[string]interface{}{"kid": k.(*jose.JSONWebKey).KeyID}},
		Subject:  "sub:" + user,
		Username: user,
	}
}

func (s *Server) discovery(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"issuer":                                s.Issuer(),
		"authorization_endpoint":                s.AuthorizeURL(),
		"token_endpoint":                        s.TokenURL(),
		"jwks_uri":                              s.JWKSURL(),
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "email", "profile"},
	})
}

func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.jwksFetches++
	set := jose.JSONWebKeySet{}
	for _, k := range s.signingKeys {
		set.Keys = append(set.Keys, k.Public())
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(set)
}

// SignJWT signs claims with the server's current key (RS256, its kid in
// the header), as a JWT access token of this issuer: for resource servers
// that verify tokens against JWKSURL (MCP authorization).
func (s *Server) SignJWT(tb testing.TB, claims map[string]any) string {
	tb.Helper()
	k, _ := s.signingKey(context.Background())
	jwk := k.(*jose.JSONWebKey)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jwk.Key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", jwk.KeyID))
	if err != nil {
		tb.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
