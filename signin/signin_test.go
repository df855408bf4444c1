package signin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

const operatorToken = "sba_people_test_operator_token"

// clock is the real clock moved forward by Add.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time      { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Add(d time.Duration) { c.offset.Add(int64(d)) }

// env is a server built by server.New with one tenant, "acme".
type env struct {
	t     *testing.T
	srv   *servertest.Server
	clock *clock
}

func start(t *testing.T, db *database.DB) *env {
	t.Helper()
	c := &clock{}
	srv := servertest.Start(t, server.Config{DB: db, AdminToken: secrets.New(operatorToken), Now: c.Now})
	e := &env{t: t, srv: srv, clock: c}
	if _, err := srv.Tenants().CreateTenant(context.Background(), "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	return e
}

// browser is an HTTP client that follows redirects and keeps cookies.
func (e *env) browser() *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

// invite mints an invitation through the operator API and returns its URL.
func (e *env) invite(email, role string) string {
	e.t.Helper()
	body := `{"email":"` + email + `","role":"` + role + `"}`
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/tenants/acme/invitations", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		URL   string `json:"url"`
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(res.Body)
		e.t.Fatalf("POST invitations = %d %s", res.StatusCode, b)
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		e.t.Fatal(err)
	}
	if out.Email != email || out.Role != role || !strings.HasPrefix(out.URL, e.srv.URL+signin.LinkPath+"?token=") {
		e.t.Fatalf("invitation %+v", out)
	}
	return out.URL
}

var tokenField = regexp.MustCompile(`name="token" value="([^"]+)"`)

// openLink opens a link in the browser as a person does: GET shows the
// confirmation form, its button posts it. It returns the final response.
func (e *env) openLink(b *http.Client, link string, header http.Header) (*http.Response, string) {
	e.t.Helper()
	res, err := b.Get(link)
	if err != nil {
		e.t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := tokenField.FindSubmatch(page)
	if res.StatusCode != http.StatusOK || m == nil {
		e.t.Fatalf("GET %s = %d without the form:\n%s", signin.LinkPath, res.StatusCode, page)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+signin.LinkPath, strings.NewReader(url.Values{"token": {unescape(string(m[1]))}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err = b.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

func unescape(s string) string {
	return strings.NewReplacer("&#43;", "+", "&#61;", "=", "&amp;", "&").Replace(s)
}

// whoami is GET /signin/session.
type whoami struct {
	ID        string `json:"id"`
	Tenant    string `json:"tenant_id"`
	UserID    string `json:"user_id"`
	Role      string `json:"role"`
	Email     string `json:"email"`
	CSRFToken string `json:"csrf_token"`
}

func (e *env) whoami(b *http.Client) (whoami, int) {
	e.t.Helper()
	res, err := b.Get(e.srv.URL + signin.SessionPath)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var w whoami
	if res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(&w); err != nil {
			e.t.Fatal(err)
		}
	}
	return w, res.StatusCode
}

// cookie returns the value of the browser's cookie name.
func (e *env) cookie(b *http.Client, name string) string {
	u, _ := url.Parse(e.srv.URL)
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

func (e *env) post(b *http.Client, path string, form url.Values, header http.Header) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := b.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// An invitation minted by the operator signs its person in once, as a new
// member with the invited role; the link cannot be replayed, and an
// expired one creates nobody.
func TestInvitationSignsInOnce(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := start(t, db)
		link := e.invite("ann@example.com", "owner")
		b := e.browser()
		res, page := e.openLink(b, link, nil)
		if res.StatusCode != http.StatusOK || res.Request.URL.Path != signin.Prefix || !strings.Contains(page, "ann@example.com") {
			t.Fatalf("after the link: %d at %s:\n%s", res.StatusCode, res.Request.URL, page)
		}
		me, status := e.whoami(b)
		if status != http.StatusOK || me.Email != "ann@example.com" || me.Role != "owner" || !strings.HasPrefix(me.UserID, "usr_") {
			t.Fatalf("session = %d %+v", status, me)
		}
		if me.CSRFToken == "" || me.CSRFToken != e.cookie(b, "sb_csrf") {
			t.Fatalf("the CSRF token %q is not the sb_csrf cookie's", me.CSRFToken)
		}

		// Replaying the link, in this browser or another, is refused.
		for _, other := range []*http.Client{b, e.browser()} {
			res, page := e.openLink(other, link, nil)
			if res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "invalid_link") {
				t.Fatalf("replayed link: %d\n%s", res.StatusCode, page)
			}
		}
		if _, status := e.whoami(b); status != http.StatusOK {
			t.Fatal("a refused replay ended the session")
		}

		// An expired invitation is refused and creates nobody.
		late := e.invite("bob@example.com", "member")
		e.clock.Add(24*time.Hour + time.Second)
		res, _ = e.openLink(e.browser(), late, nil)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("expired link: %d", res.StatusCode)
		}
		if _, err := e.srv.Members().MemberByEmail(context.Background(), switchboard.TenantID(me.Tenant), "bob@example.com"); switchboard.CodeOf(err) != "member_not_found" {
			t.Fatalf("an expired invitation created a member: %v", err)
		}
	})
}

// The session cookie is HttpOnly and SameSite=Lax; Secure, and named
// __Host-, when the public URL is https.
func TestSessionCookieAttributes(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	e := start(t, db)
	for _, publicURL := range []string{"http://switchboard.test", "https://switchboard.test"} {
		tn, _ := e.srv.Tenants().Tenant(context.Background(), "acme")
		_, token, err := e.srv.Members().Invite(context.Background(), members.ActorOperator, tn.ID, "cookie"+strings.TrimSuffix(publicURL[:5], ":")+"@example.com", members.RoleMember, 0)
		if err != nil {
			t.Fatal(err)
		}
		h := signin.New(signin.Config{Members: e.srv.Members(), PublicURL: publicURL})
		req := httptest.NewRequest(http.MethodPost, publicURL+signin.LinkPath, strings.NewReader(url.Values{"token": {token.Reveal()}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("%s: sign-in = %d %s", publicURL, rec.Code, rec.Body)
		}
		secure := strings.HasPrefix(publicURL, "https")
		var session *http.Cookie
		for _, c := range rec.Result().Cookies() {
			if c.Name == h.SessionCookie() {
				session = c
			}
		}
		if session == nil {
			t.Fatalf("%s: no %s cookie in %v", publicURL, h.SessionCookie(), rec.Header()["Set-Cookie"])
		}
		if !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure != secure || session.Path != "/" ||
			strings.HasPrefix(session.Name, "__Host-") != secure || session.MaxAge <= 0 {
			t.Fatalf("%s: session cookie %+v", publicURL, session)
		}
	}
}

// The session id changes at sign-in: a session cookie planted in the
// browser before (by an attacker who knows its value) is ended, not
// carried over; and it changes again when the member's role changes.
func TestSessionFixation(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := start(t, db)
		ctx := context.Background()
		e.openLink(e.browser(), e.invite("ann@example.com", "owner"), nil)
		tn, _ := e.srv.Tenants().Tenant(ctx, "acme")
		ann, err := e.srv.Members().MemberByEmail(ctx, tn.ID, "ann@example.com")
		if err != nil {
			t.Fatal(err)
		}
		// The attacker holds a live session of the member and plants its
		// token in the victim's browser.
		_, planted, err := e.srv.Members().CreateSession(ctx, tn.ID, ann.UserID)
		if err != nil {
			t.Fatal(err)
		}
		b := e.browser()
		u, _ := url.Parse(e.srv.URL)
		b.Jar.SetCookies(u, []*http.Cookie{{Name: "sb_session", Value: planted.Reveal(), Path: "/"}})

		_, login, err := e.srv.Members().LoginLink(ctx, members.ActorOperator, tn.ID, "ann@example.com", 0)
		if err != nil {
			t.Fatal(err)
		}
		e.openLink(b, signin.LinkURL(e.srv.URL, login.Reveal()), nil)
		after := e.cookie(b, "sb_session")
		if after == "" || after == planted.Reveal() {
			t.Fatal("the session cookie did not change at sign-in")
		}
		if _, err := e.srv.Members().ResolveSession(ctx, planted.Reveal()); switchboard.CodeOf(err) != "invalid_session" {
			t.Fatalf("the planted session still works after sign-in: %v", err)
		}
		before, _ := e.whoami(b)

		// A privilege change rotates the session at the next request.
		bob, err := e.srv.Members().AddMember(ctx, members.ActorOperator, tn.ID, "bob@example.com", members.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.srv.Members().SetRole(ctx, bob.UserID, tn.ID, ann.UserID, members.RoleAdmin); err != nil {
			t.Fatal(err)
		}
		me, status := e.whoami(b)
		rotated := e.cookie(b, "sb_session")
		if status != http.StatusOK || me.Role != "admin" || rotated == after || me.ID == before.ID {
			t.Fatalf("after a role change: %d %+v, cookie changed %v", status, me, rotated != after)
		}
		if me.CSRFToken != e.cookie(b, "sb_csrf") {
			t.Fatal("the rotated session's CSRF cookie is stale")
		}
		if _, err := e.srv.Members().ResolveSession(ctx, after); switchboard.CodeOf(err) != "invalid_session" {
			t.Fatalf("the session before the role change still works: %v", err)
		}
	})
}

// A state-changing request made with the session cookie needs the
// session's CSRF token; a cross-site post without it is refused and
// changes nothing. A cross-site sign-in form is refused too (login CSRF).
func TestCSRF(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := start(t, db)
		b := e.browser()
		e.openLink(b, e.invite("ann@example.com", "owner"), nil)
		me, _ := e.whoami(b)

		evil := http.Header{"Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
		for _, form := range []url.Values{nil, {"csrf_token": {"forged"}}} {
			res := e.post(b, signin.SignOutPath, form, evil)
			if res.StatusCode != http.StatusForbidden {
				t.Fatalf("cross-site sign-out with %v: %d", form, res.StatusCode)
			}
		}
		if _, status := e.whoami(b); status != http.StatusOK {
			t.Fatal("a refused cross-site post signed the browser out")
		}

		// The echo middleware of the /v1 routes enforces the same.
		ec := echo.New()
		ec.HTTPErrorHandler = func(err error, c echo.Context) { switchboard.WriteError(c.Response(), err) }
		var seen members.Session
		ok := func(c echo.Context) error {
			seen, _ = signin.SessionOf(c.Request().Context())
			return c.NoContent(http.StatusNoContent)
		}
		ec.POST("/v1/thing", ok, e.srv.SignIn().Authenticate)
		ec.GET("/v1/thing", ok, e.srv.SignIn().Authenticate)
		api := httptest.NewServer(ec)
		defer api.Close()
		cookie := "sb_session=" + e.cookie(b, "sb_session")
		for _, tc := range []struct {
			method string
			header map[string]string
			want   int
			signed bool
		}{
			{http.MethodPost, map[string]string{"Cookie": cookie}, http.StatusForbidden, false},
			{http.MethodPost, map[string]string{"Cookie": cookie, signin.CSRFHeader: "forged"}, http.StatusForbidden, false},
			{http.MethodPost, map[string]string{"Cookie": cookie, signin.CSRFHeader: me.CSRFToken}, http.StatusNoContent, true},
			{http.MethodGet, map[string]string{"Cookie": cookie}, http.StatusNoContent, true},
			{http.MethodGet, map[string]string{"Cookie": "sb_session=sbs_forged"}, http.StatusUnauthorized, false},
			// Without the cookie, or with a bearer credential, the route's
			// own authentication decides.
			{http.MethodPost, nil, http.StatusNoContent, false},
			{http.MethodPost, map[string]string{"Cookie": cookie, "Authorization": "Bearer x"}, http.StatusNoContent, false},
		} {
			seen = members.Session{}
			req, _ := http.NewRequest(tc.method, api.URL+"/v1/thing", bytes.NewReader(nil))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want || (seen.UserID == me.UserID) != tc.signed {
				t.Errorf("%s %v: %d %s (session %q), want %d signed-in %v", tc.method, tc.header, res.StatusCode, body, seen.UserID, tc.want, tc.signed)
			}
		}

		// Login CSRF: a sign-in form posted from another site is refused
		// and the link stays usable.
		link := e.invite("bob@example.com", "member")
		other := e.browser()
		res, page := e.openLink(other, link, http.Header{"Origin": {"http://evil.example"}})
		if res.StatusCode != http.StatusForbidden || !strings.Contains(page, "csrf_failed") {
			t.Fatalf("cross-site sign-in form: %d\n%s", res.StatusCode, page)
		}
		// Origin "null" (a sandboxed frame, a data: URL) is refused unless
		// the browser says the form was same-origin, which is what it sends
		// for this page's own form under Referrer-Policy: no-referrer.
		for _, h := range []http.Header{
			{"Origin": {"null"}},
			{"Origin": {"null"}, "Sec-Fetch-Site": {"cross-site"}},
		} {
			if res, page := e.openLink(other, link, h); res.StatusCode != http.StatusForbidden || !strings.Contains(page, "csrf_failed") {
				t.Fatalf("sign-in form with %v: %d\n%s", h, res.StatusCode, page)
			}
		}
		if res, _ := e.openLink(other, link, http.Header{"Origin": {"null"}, "Sec-Fetch-Site": {"same-origin"}}); res.StatusCode != http.StatusOK {
			t.Fatalf("the link's own form under no-referrer (Origin null, same-origin): %d", res.StatusCode)
		}
	})
}

// Sign-out ends this browser's session; sign-out everywhere ends the
// member's others too; sessions end after idle time.
func TestSignOut(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := start(t, db)
		ctx := context.Background()
		tn, _ := e.srv.Tenants().Tenant(ctx, "acme")
		b1, b2, b3 := e.browser(), e.browser(), e.browser()
		e.openLink(b1, e.invite("ann@example.com", "owner"), nil)
		for _, b := range []*http.Client{b2, b3} {
			_, link, err := e.srv.Members().LoginLink(ctx, members.ActorOperator, tn.ID, "ann@example.com", 0)
			if err != nil {
				t.Fatal(err)
			}
			e.openLink(b, signin.LinkURL(e.srv.URL, link.Reveal()), nil)
		}

		me, _ := e.whoami(b1)
		res := e.post(b1, signin.SignOutPath, url.Values{"csrf_token": {me.CSRFToken}}, nil)
		if res.StatusCode != http.StatusOK || e.cookie(b1, "sb_session") != "" {
			t.Fatalf("sign-out: %d, cookie %q", res.StatusCode, e.cookie(b1, "sb_session"))
		}
		if _, status := e.whoami(b1); status != http.StatusUnauthorized {
			t.Fatalf("after sign-out: %d", status)
		}
		if _, status := e.whoami(b2); status != http.StatusOK {
			t.Fatal("signing out one browser ended another")
		}

		me2, _ := e.whoami(b2)
		e.post(b2, signin.SignOutEverywherePath, url.Values{"csrf_token": {me2.CSRFToken}}, nil)
		for i, b := range []*http.Client{b2, b3} {
			if _, status := e.whoami(b); status != http.StatusUnauthorized {
				t.Fatalf("browser %d after sign-out everywhere: %d", i+2, status)
			}
		}

		// Idle expiry (8 h by default).
		b4 := e.browser()
		_, link, _ := e.srv.Members().LoginLink(ctx, members.ActorOperator, tn.ID, "ann@example.com", 0)
		e.openLink(b4, signin.LinkURL(e.srv.URL, link.Reveal()), nil)
		e.clock.Add(members.DefaultSessionIdle + time.Minute)
		if _, status := e.whoami(b4); status != http.StatusUnauthorized {
			t.Fatalf("an idle session: %d", status)
		}
	})
}

// The operator's invitation route refuses bad input with a typed error
// and writes nothing; it needs the operator token.
func TestInvitationRouteRefusesBadInput(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	e := start(t, db)
	for _, tc := range []struct {
		path, body, token string
		status            int
		code              string
	}{
		{"/v1/tenants/acme/invitations", `{"email":"a@example.com","role":"king"}`, operatorToken, 400, "invalid_role"},
		{"/v1/tenants/acme/invitations", `{"email":"not an email","role":"owner"}`, operatorToken, 400, "invalid_email"},
		{"/v1/tenants/acme/invitations", `{"email":"a@example.com","role":"owner","lifetime_seconds":-5}`, operatorToken, 400, "invalid_lifetime"},
		{"/v1/tenants/acme/invitations", `{"email":"a@example.com","role":"owner","extra":1}`, operatorToken, 400, "invalid_json"},
		{"/v1/tenants/nope/invitations", `{"email":"a@example.com","role":"owner"}`, operatorToken, 404, "tenant_not_found"},
		{"/v1/tenants/acme/invitations", `{"email":"a@example.com","role":"owner"}`, "", 401, "unauthorized"},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body switchboard.ErrorBody
		json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != tc.status || body.Error.Code != tc.code {
			t.Errorf("%s %s: %d %s, want %d %s", tc.path, tc.body, res.StatusCode, body.Error.Code, tc.status, tc.code)
		}
	}
	if n := dbtest.Count(t, db, "member_invitations", ""); n != 0 {
		t.Fatalf("refused requests stored %d invitations", n)
	}
}

// Sessions are read from the store on every request, so removing a member
// or ending their sessions on one replica refuses their cookie on every
// other replica at its next request.
func TestRemovalEndsSessionsOnEveryReplica(t *testing.T) {
	t.Parallel()
	dsn := dbtest.PostgresURL(t)
	var replicas []*env
	for i := range 2 {
		db, err := database.Open(context.Background(), dsn, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if i == 0 {
			if _, err := db.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		srv := servertest.Start(t, server.Config{DB: db, AdminToken: secrets.New(operatorToken)})
		replicas = append(replicas, &env{t: t, srv: srv, clock: &clock{}})
	}
	a, b := replicas[0], replicas[1]
	ctx := context.Background()
	tn, err := a.srv.Tenants().CreateTenant(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := b.srv.Members().AddMember(ctx, members.ActorOperator, tn.ID, "owner@example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	browser := a.browser()
	a.openLink(browser, a.invite("ann@example.com", "member"), nil)
	me, status := a.whoami(browser)
	if status != http.StatusOK {
		t.Fatalf("signed in on replica A: %d", status)
	}

	// Sign-out everywhere on replica B.
	if _, err := b.srv.Members().RevokeSessions(ctx, owner.UserID, tn.ID, me.UserID); err != nil {
		t.Fatal(err)
	}
	if _, status := a.whoami(browser); status != http.StatusUnauthorized {
		t.Fatalf("replica A after sessions ended on B: %d", status)
	}

	// Removal on replica B.
	_, link, err := b.srv.Members().LoginLink(ctx, members.ActorOperator, tn.ID, "ann@example.com", 0)
	if err != nil {
		t.Fatal(err)
	}
	a.openLink(browser, signin.LinkURL(a.srv.URL, link.Reveal()), nil)
	if _, status := a.whoami(browser); status != http.StatusOK {
		t.Fatal("signing in again failed")
	}
	if err := b.srv.Members().RemoveMember(ctx, owner.UserID, tn.ID, me.UserID); err != nil {
		t.Fatal(err)
	}
	if _, status := a.whoami(browser); status != http.StatusUnauthorized {
		t.Fatalf("replica A after the member was removed on B: %d", status)
	}
}
