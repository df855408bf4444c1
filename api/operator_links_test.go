package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
)

// TestOperatorSignInLink mints an operator sign-in link with the operator
// token, redeems it through the sign-in handler's confirmation form, and
// uses the operator session it starts on operator routes: reads with the
// cookie alone, changes only with the session's CSRF token. A member's
// session is refused the same routes, and the link works once.
func TestOperatorSignInLink(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		if c := e.expect(e.do("POST", "/v1/operator-sign-in-links", `{"lifetime_seconds":7200}`), 400).errCode(t); c != "invalid_lifetime" {
			t.Errorf("a 2 h operator link: %s, want invalid_lifetime", c)
		}
		created := e.expect(e.req("POST", "/v1/operator-sign-in-links", "-", "", nil), 201)
		if created.header.Get("Cache-Control") != "no-store" {
			t.Errorf("the link's answer may be cached: %q", created.header.Get("Cache-Control"))
		}
		link, err := url.Parse(created.json(t)["url"].(string))
		if err != nil || link.Path != signin.LinkPath || !strings.HasPrefix(link.Query().Get("token"), members.OperatorLinkTokenPrefix) {
			t.Fatalf("link %v (%v)", link, err)
		}
		redeem := func() *http.Response {
			t.Helper()
			req, err := http.NewRequest("POST", e.srv.URL+signin.LinkPath, strings.NewReader(url.Values{"token": {link.Query().Get("token")}}.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", e.srv.URL)
			res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res
		}
		res := redeem()
		var session string
		for _, c := range res.Cookies() {
			if c.Name == "sb_session" {
				session = c.Value
			}
		}
		if res.StatusCode != http.StatusSeeOther || !members.IsOperatorSession(session) {
			t.Fatalf("redeeming the operator link: %d, session cookie %v", res.StatusCode, session != "")
		}
		if again := redeem(); again.StatusCode != http.StatusUnauthorized {
			t.Errorf("the operator link worked twice: %d", again.StatusCode)
		}

		op := sessionCred + session
		e.expect(e.req("GET", "/v1/operator-tokens", op, "", nil), 200)
		e.expect(e.req("POST", "/v1/tenants", op, "application/json", strings.NewReader(`{"slug":"acme","name":"Acme"}`)), 201)
		// Without the CSRF token, a change made with the cookie is refused.
		r, err := http.NewRequest("POST", e.srv.URL+"/v1/tenants", strings.NewReader(`{"slug":"beta","name":"Beta"}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		r.AddCookie(&http.Cookie{Name: "sb_session", Value: session})
		noCSRF, err := e.srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		noCSRF.Body.Close()
		if noCSRF.StatusCode != http.StatusForbidden {
			t.Errorf("POST /v1/tenants with the operator cookie and no CSRF token: %d, want 403", noCSRF.StatusCode)
		}
		if _, err := e.server.Tenants().Tenant(t.Context(), "beta"); err == nil {
			t.Errorf("the tenant was created without the CSRF token")
		}

		owner := e.ownerSession("acme")
		for _, path := range []string{"/v1/operator-tokens", "/v1/providers", "/v1/tenants"} {
			if c := e.expect(e.req("GET", path, owner, "", nil), 403).errCode(t); c != "role_required" {
				t.Errorf("GET %s as a tenant's owner: %s, want role_required", path, c)
			}
		}
		e.expect(e.req("POST", "/v1/operator-sign-in-links", owner, "", nil), 403)

		// Signed out, the operator session opens nothing.
		out := e.req("POST", signin.SignOutPath, op, "application/x-www-form-urlencoded", strings.NewReader(url.Values{"csrf_token": {members.CSRFToken(session)}}.Encode()))
		if !strings.Contains(string(out.body), "Signed out") {
			t.Errorf("signing out (redirected to the status page): %d %s", out.status, out.body)
		}
		e.expect(e.req("GET", "/v1/operator-tokens", op, "", nil), 401)
	})
}
