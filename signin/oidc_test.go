package signin_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
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
	idp.AddClient(authztest.Client{ID: "switchboard", Secret: oidcSecret, RedirectURIs: []string{srv.URL + signin.OIDCCallbackPath + "/corp"},
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
	res, err := b.Get(e.srv.URL + signin.OIDCCallbackPath + "/corp?code=x&state=y")
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
		if r.URL.Path == signin.OIDCCallbackPath+"/corp" {
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

// twoIssuers is a server with two named OpenID Connect issuers, each a
// fosite server of its own on loopback, registering the same client id
// (so that only the issuer, not the audience, tells their tokens apart).
func twoIssuers(t *testing.T, db *database.DB) (*env, map[string]*authztest.Server) {
	t.Helper()
	idps := map[string]*authztest.Server{"alpha": authztest.New(t, authztest.Options{}), "beta": authztest.New(t, authztest.Options{})}
	c := &clock{}
	srv := servertest.Start(t, server.Config{DB: db, AdminToken: secrets.New(operatorToken), Now: c.Now,
		OIDCIssuers: []signin.OIDCIssuer{
			{Name: "alpha", Label: "Alpha ID", Issuer: idps["alpha"].Issuer(), ClientID: "switchboard", ClientSecret: secrets.New(oidcSecret)},
			{Name: "beta", Issuer: idps["beta"].Issuer(), ClientID: "switchboard", ClientSecret: secrets.New(oidcSecret)},
		},
		OIDCDomains: map[string][]string{"acme": {"example.com"}},
	})
	for name, idp := range idps {
		idp.AddClient(authztest.Client{ID: "switchboard", Secret: oidcSecret,
			RedirectURIs: []string{srv.URL + signin.OIDCIssuer{Name: name}.CallbackPath()}, Scopes: []string{"openid", "email"}})
	}
	for _, slug := range []string{"acme", "globex"} {
		if _, err := srv.Tenants().CreateTenant(context.Background(), slug, slug); err != nil {
			t.Fatal(err)
		}
	}
	return &env{t: t, srv: srv, clock: c}, idps
}

// With two issuers, the sign-in page offers a button for each, a person
// signs in through either (a browser that follows redirects and keeps
// cookies), each issuer has its own callback, and an answer of one
// issuer never completes a flow started with the other.
func TestOIDCSeveralIssuers(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e, idps := twoIssuers(t, db)
		ctx := context.Background()
		links := e.srv.SignIn().Issuers()
		if len(links) != 2 || links[0].Name != "Alpha ID" || links[1].Name != "beta" ||
			links[0].StartURL != signin.OIDCStartPath+"?issuer=alpha" || links[1].StartURL != signin.OIDCStartPath+"?issuer=beta" {
			t.Fatalf("Issuers() = %+v", links)
		}

		// The signed-out page has one button per issuer, keeping next.
		b := e.browser()
		res, err := b.Get(e.srv.URL + signin.Prefix + "?next=" + url.QueryEscape(signin.SessionPath))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, want := range []string{">Sign in with Alpha ID</a>", ">Sign in with beta</a>", "one-time sign-in link",
			strings.ReplaceAll(signin.OIDCStartPath+"?"+url.Values{"issuer": {"beta"}, "next": {signin.SessionPath}}.Encode(), "&", "&amp;")} {
			if !strings.Contains(string(body), want) {
				t.Fatalf("the sign-in page lacks %q:\n%s", want, body)
			}
		}

		// A person signs in through each issuer: a new member joins acme
		// (its domain is admitted) through alpha without naming the
		// tenant, and comes back through beta to the same membership.
		signInWith := func(b *http.Client, start, login string) (*http.Response, string) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+start, nil)
			req.Header.Set(authztest.LoginHeader, login)
			res, err := b.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			return res, string(body)
		}
		for _, l := range links {
			b := e.browser()
			res, page := signInWith(b, l.StartURLFor("", signin.SessionPath), "ann@example.com")
			if res.StatusCode != http.StatusOK || res.Request.URL.Path != signin.SessionPath {
				t.Fatalf("sign-in with %s: %d at %s\n%s", l.Name, res.StatusCode, res.Request.URL, page)
			}
			if me, _ := e.whoami(b); me.Email != "ann@example.com" || me.Role != "member" {
				t.Fatalf("session after signing in with %s: %+v", l.Name, me)
			}
		}
		if n := dbtest.Count(t, db, "members", ""); n != 1 {
			t.Fatalf("%d members after signing in twice as ann, want 1", n)
		}
		for name, idp := range idps {
			if n := idp.TokenRequests("authorization_code"); n != 1 {
				t.Errorf("issuer %s got %d code exchanges, want 1", name, n)
			}
		}
		// A member of an invitation-only tenant, by its tenant.
		globex, _ := e.srv.Tenants().Tenant(ctx, "globex")
		if _, err := e.srv.Members().AddMember(ctx, members.ActorOperator, globex.ID, "dan@globex.test", members.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		b = e.browser()
		if res, page := signInWith(b, links[1].StartURLFor("globex", ""), "dan@globex.test"); res.StatusCode != http.StatusOK {
			t.Fatalf("dan with beta: %d\n%s", res.StatusCode, page)
		}
		if me, _ := e.whoami(b); me.Tenant != string(globex.ID) || me.Role != "admin" {
			t.Fatalf("dan's session %+v", me)
		}

		// Without a tenant: a stranger of no admitted domain is refused; a
		// person in two tenants is asked to name one.
		for _, tc := range []struct{ login, code string }{{"eve@elsewhere.test", "not_a_member"}, {"dan@globex.test", ""}} {
			if tc.code == "" {
				acme, _ := e.srv.Tenants().Tenant(ctx, "acme")
				if _, err := e.srv.Members().AddMember(ctx, members.ActorOperator, acme.ID, tc.login, members.RoleMember); err != nil {
					t.Fatal(err)
				}
				tc.code = "tenant_required"
			}
			b := e.browser()
			res, page := signInWith(b, links[0].StartURLFor("", ""), tc.login)
			if !strings.Contains(page, tc.code) || res.StatusCode < 400 {
				t.Errorf("%s without a tenant: %d, want %s\n%s", tc.login, res.StatusCode, tc.code, page)
			}
			if _, status := e.whoami(b); status != http.StatusUnauthorized {
				t.Errorf("%s without a tenant: a refused sign-in left a session", tc.login)
			}
		}

		// Mix-up: one browser starts a flow with each issuer; alpha's
		// answer (code and state) is delivered to beta's callback.
		b = e.browser()
		stop := &http.Client{Jar: b.Jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(r.URL.Path, signin.OIDCCallbackPath) {
				return http.ErrUseLastResponse
			}
			return nil
		}}
		start := func(l signin.IssuerLink) *url.URL {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, e.srv.URL+l.StartURLFor("acme", ""), nil)
			req.Header.Set(authztest.LoginHeader, "ann@example.com")
			res, err := stop.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			loc, err := res.Location()
			if err != nil || loc.Query().Get("code") == "" {
				t.Fatalf("%s did not answer with a code: %d %v", l.Name, res.StatusCode, err)
			}
			return loc
		}
		alpha := start(links[0])
		// Beta's callback gets alpha's code with alpha's state, then with
		// the state of beta's own flow (a flow cookie is spent by its
		// callback, so beta's flow is started afresh for each).
		for i, useBetaState := range []bool{false, true} {
			beta := start(links[1])
			if alpha.Path == beta.Path {
				t.Fatalf("both issuers share the callback %s", beta.Path)
			}
			state := alpha.Query().Get("state")
			if useBetaState {
				state = beta.Query().Get("state")
			}
			before := idps["beta"].TokenRequests("authorization_code")
			mixed := *beta
			mixed.RawQuery = url.Values{"code": {alpha.Query().Get("code")}, "state": {state}}.Encode()
			res, err := stop.Get(mixed.String())
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(page), "oidc_failed") {
				t.Fatalf("case %d: alpha's answer at beta's callback: %d\n%s", i, res.StatusCode, page)
			}
			if _, status := e.whoami(b); status != http.StatusUnauthorized {
				t.Fatalf("case %d: alpha's answer completed beta's flow", i)
			}
			// Under alpha's state the callback refuses before asking beta;
			// under beta's own state, beta itself refuses alpha's code.
			if asked := idps["beta"].TokenRequests("authorization_code") > before; asked != useBetaState {
				t.Errorf("case %d: beta asked to exchange alpha's code: %v", i, asked)
			}
		}
		// Alpha's own answer still completes alpha's flow: beta's callback
		// spent only beta's flow cookie.
		res, err = b.Get(alpha.String())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if me, status := e.whoami(b); status != http.StatusOK || me.Email != "ann@example.com" {
			t.Fatalf("alpha's own answer after the mix-up: %d %+v", status, me)
		}
		// The unnamed callback path belongs to no issuer here.
		res, err = e.browser().Get(e.srv.URL + signin.OIDCCallbackPath + "?code=x&state=y")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Fatalf("the unnamed callback with named issuers: %d", res.StatusCode)
		}
	})
}
