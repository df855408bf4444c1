package signin_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

const oidcSecret = "oidc-client-secret-canary-7f3a"

// oidcEnv is a server built by server.New that signs people in with a
// real (fosite) OpenID Connect provider on loopback. Tenant acme admits
// verified example.com addresses; globex is invitation only.
func oidcEnv(t *testing.T, db *database.DB) (*env, *authztest.Server) {
	t.Helper()
	idp := authztest.New(t, authztest.Options{})
	c := &clock{}
	srv := servertest.Start(t, server.Config{DB: db, AdminToken: secrets.New(operatorToken), Now: c.Now,
		OIDCIssuers: []signin.OIDCIssuer{{Name: "corp", Issuer: idp.Issuer(), ClientID: "switchboard", ClientSecret: secrets.New(oidcSecret)}},
		OIDCDomains: map[string][]string{"acme": {"example.com"}},
	})
	idp.AddClient(authztest.Client{ID: "switchboard", Secret: oidcSecret, RedirectURIs: []string{srv.URL + signin.OIDCCallbackPath},
		Scopes: []string{"openid", "email"}})
	for _, slug := range []string{"acme", "globex"} {
		if _, err := srv.Tenants().CreateTenant(context.Background(), slug, slug); err != nil {
			t.Fatal(err)
		}
	}
	return &env{t: t, srv: srv, clock: c}, idp
}

// signInOIDC runs the whole browser flow: start, the provider's
// authorize endpoint (which signs in the login of LoginHeader), the
// callback; the client follows every redirect and keeps cookies.
func (e *env) signInOIDC(b *http.Client, tenant, login string, header http.Header) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+signin.OIDCStartPath+"?tenant="+tenant, nil)
	req.Header.Set(authztest.LoginHeader, login)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := b.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e, idp := oidcEnv(t, db)
		ctx := context.Background()

		// A verified address of an admitted domain joins as a member.
		b := e.browser()
		res, page := e.signInOIDC(b, "acme", "ann@example.com", nil)
		if res.StatusCode != http.StatusOK || res.Request.URL.Path != signin.Prefix || !strings.Contains(page, "ann@example.com") {
			t.Fatalf("OIDC sign-in: %d at %s\n%s", res.StatusCode, res.Request.URL, page)
		}
		me, status := e.whoami(b)
		if status != http.StatusOK || me.Email != "ann@example.com" || me.Role != "member" {
			t.Fatalf("session after OIDC sign-in: %d %+v", status, me)
		}
		first := e.cookie(b, "sb_session")

		// Signing in again in the same browser gives a new session id.
		if res, _ := e.signInOIDC(b, "acme", "ann@example.com", nil); res.StatusCode != http.StatusOK {
			t.Fatalf("second sign-in: %d", res.StatusCode)
		}
		if again := e.cookie(b, "sb_session"); again == "" || again == first {
			t.Fatal("the session id did not change at sign-in")
		}
		if _, err := e.srv.Members().ResolveSession(ctx, first); switchboard.CodeOf(err) != "invalid_session" {
			t.Fatalf("the session before the sign-in still works: %v", err)
		}
		if n := idp.JWKSRequests(); n != 1 {
			t.Fatalf("the provider's keys were fetched %d times for two sign-ins, want 1 (cached)", n)
		}

		// Key rotation: a token signed with a new key verifies after one
		// more JWKS fetch.
		idp.RotateSigningKey(true)
		if res, page := e.signInOIDC(e.browser(), "acme", "ann@example.com", nil); res.StatusCode != http.StatusOK {
			t.Fatalf("sign-in after key rotation: %d\n%s", res.StatusCode, page)
		}
		if n := idp.JWKSRequests(); n != 2 {
			t.Fatalf("JWKS fetched %d times after a rotation, want 2", n)
		}

		// Refusals: a domain the tenant does not admit, an unverified
		// address, an invitation-only tenant. None creates a member.
		for _, tc := range []struct {
			tenant, login string
			header        http.Header
		}{
			{"acme", "bob@elsewhere.com", nil},
			{"acme", "cat@example.com", http.Header{authztest.EmailVerifiedHeader: {"false"}}},
			{"globex", "dan@example.com", nil},
		} {
			b := e.browser()
			res, page := e.signInOIDC(b, tc.tenant, tc.login, tc.header)
			if res.StatusCode != http.StatusForbidden || !strings.Contains(page, "not_a_member") {
				t.Errorf("%s in %s: %d\n%s", tc.login, tc.tenant, res.StatusCode, page)
			}
			if _, status := e.whoami(b); status != http.StatusUnauthorized {
				t.Errorf("%s in %s: a refused sign-in left a session", tc.login, tc.tenant)
			}
		}
		if n := dbtest.Count(t, db, "members", ""); n != 1 {
			t.Fatalf("%d members after refused sign-ins, want 1", n)
		}

		// An invitation-only tenant's members sign in with their role.
		globex, _ := e.srv.Tenants().Tenant(ctx, "globex")
		if _, err := e.srv.Members().AddMember(ctx, members.ActorOperator, globex.ID, "dan@example.com", members.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		b = e.browser()
		if res, page := e.signInOIDC(b, "globex", "DAN@example.com", nil); res.StatusCode != http.StatusOK {
			t.Fatalf("member of an invitation-only tenant: %d\n%s", res.StatusCode, page)
		}
		if me, _ := e.whoami(b); me.Role != "admin" || me.Tenant != string(globex.ID) {
			t.Fatalf("globex session %+v", me)
		}
	})
}

// The callback only completes a sign-in this browser started: a forged
// state, a missing flow cookie or a provider error is refused, and the
// client secret never reaches a page.
func TestOIDCCallbackRefusals(t *testing.T) {
	t.Parallel()
	e, _ := oidcEnv(t, dbtest.SQLite(t))
	// Without a flow cookie (another browser's callback URL).
	b := e.browser()
	res, err := b.Get(e.srv.URL + signin.OIDCCallbackPath + "?code=x&state=y")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(page), "oidc_failed") {
		t.Fatalf("callback without a flow: %d\n%s", res.StatusCode, page)
	}

	// With this browser's flow but another state: stop the redirect at
	// the callback and replace the state.
	stop := &http.Client{Jar: b.Jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if r.URL.Path == signin.OIDCCallbackPath {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+signin.OIDCStartPath+"?tenant=acme", nil)
	req.Header.Set(authztest.LoginHeader, "ann@example.com")
	res, err = stop.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	callback, err := res.Location()
	if err != nil || callback.Query().Get("code") == "" {
		t.Fatalf("the provider did not redirect to the callback: %d %v", res.StatusCode, err)
	}
	q := callback.Query()
	q.Set("state", "forged-state-value")
	callback.RawQuery = q.Encode()
	res, err = b.Get(callback.String())
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || strings.Contains(string(page), oidcSecret) {
		t.Fatalf("forged state: %d\n%s", res.StatusCode, page)
	}
	if _, status := e.whoami(b); status != http.StatusUnauthorized {
		t.Fatal("a forged state signed the browser in")
	}

	// An unknown tenant and an unknown issuer are typed errors.
	for path, code := range map[string]string{
		signin.OIDCStartPath + "?tenant=nope":              "tenant_not_found",
		signin.OIDCStartPath + "?tenant=acme&issuer=other": "oidc_not_configured",
	} {
		res, err := e.browser().Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(page), code) {
			t.Errorf("%s: %d\n%s", path, res.StatusCode, page)
		}
	}
}
