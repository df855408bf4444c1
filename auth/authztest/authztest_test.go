package authztest_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"golang.org/x/oauth2"

	"github.com/switchboardhq/switchboard/auth/authztest"
)

// The test server rotates refresh tokens, and a reused one revokes the
// whole family; PKCE is enforced.
func TestRefreshRotationAndReuseDetection(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{})
	redirect := "http://127.0.0.1:1/cb"
	as.AddClient(authztest.Client{ID: "c", Secret: "s", RedirectURIs: []string{redirect}, Scopes: []string{"read"}})
	cfg := &oauth2.Config{ClientID: "c", ClientSecret: "s", RedirectURL: redirect, Scopes: []string{"read"},
		Endpoint: oauth2.Endpoint{AuthURL: as.AuthorizeURL(), TokenURL: as.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader}}
	ctx := context.Background()
	code := func(opts ...oauth2.AuthCodeOption) string {
		req, _ := http.NewRequest("GET", cfg.AuthCodeURL("state-123456789", opts...), nil)
		req.Header.Set(authztest.LoginHeader, "alice")
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		u, _ := url.Parse(resp.Header.Get("Location"))
		return u.Query().Get("code")
	}
	if c := code(); c != "" {
		t.Fatalf("authorize without PKCE gave a code")
	}
	v := oauth2.GenerateVerifier()
	tok, err := cfg.Exchange(ctx, code(oauth2.S256ChallengeOption(v)), oauth2.VerifierOption(v))
	if err != nil || tok.RefreshToken == "" {
		t.Fatalf("exchange: %v", err)
	}
	refresh := func(rt string) (*oauth2.Token, error) {
		return cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	}
	t2, err := refresh(tok.RefreshToken)
	if err != nil || t2.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh did not rotate: %v", err)
	}
	if _, err := refresh(tok.RefreshToken); err == nil {
		t.Fatal("reused refresh token accepted")
	}
	if _, err := refresh(t2.RefreshToken); err == nil {
		t.Fatal("the family survived a reuse")
	}
	if as.TokenRequests("refresh_token") != 3 {
		t.Errorf("refresh requests = %d", as.TokenRequests("refresh_token"))
	}
}
