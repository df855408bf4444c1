package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
)

// linkSetup is setupOAuth with two members of acme, alice and bob, and a
// trusted platform that names members (no external subjects).
type linkSetup struct {
	*oauthSetup
	members    *members.Store
	alice, bob members.Member
	platform   string // trusted, user mode header
	own        string // untrusted, fixed user alice
}

func setupLinks(t *testing.T, db *database.DB) *linkSetup {
	t.Helper()
	o := setupOAuth(t, db)
	l := &linkSetup{oauthSetup: o, members: o.s.members}
	ten, err := o.s.svc.Tenant(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if l.alice, err = l.members.AddMember(context.Background(), "test", ten.ID, "alice@acme.test", members.RoleMember); err != nil {
		t.Fatal(err)
	}
	if l.bob, err = l.members.AddMember(context.Background(), "test", ten.ID, "bob@acme.test", members.RoleMember); err != nil {
		t.Fatal(err)
	}
	l.platform = o.s.caller(t, "acme", tenants.CallerRequest{Name: "factory", Kind: tenants.KindAgentPlatform, Trusted: true,
		UserMode: tenants.UserHeader})
	l.own = o.s.caller(t, "acme", tenants.CallerRequest{Name: "alice's", Kind: tenants.KindAgentPlatform, UserID: l.alice.UserID})
	return l
}

// mint asks the API for a connect link with the given headers and body;
// it returns the status and the decoded answer.
func (l *linkSetup) mint(t *testing.T, headers map[string]string, target string) (int, map[string]any) {
	t.Helper()
	body := []byte(`{}`)
	if target != "" {
		body, _ = json.Marshal(map[string]string{"targetUserId": target})
	}
	req, _ := http.NewRequest(http.MethodPost, l.s.srv.URL+"/v1/tenants/acme/instances/crm/connect-links", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// mintFor mints a link for user as the trusted platform.
func (l *linkSetup) mintFor(t *testing.T, user string) string {
	t.Helper()
	st, out := l.mint(t, map[string]string{"Authorization": "Bearer " + l.platform}, user)
	link, _ := out["url"].(string)
	if st != http.StatusCreated || link == "" {
		t.Fatalf("mint for %s = %d %v", user, st, out)
	}
	return link
}

// signedIn returns a browser signed in to acme as m (a session cookie of
// the members store) that logs in at the authorization server as m.
func (l *linkSetup) signedIn(t *testing.T, m members.Member) (*http.Client, string) {
	t.Helper()
	_, token, err := l.members.CreateSession(context.Background(), m.Tenant, m.UserID)
	if err != nil {
		t.Fatal(err)
	}
	c := l.browser(m.UserID)
	u, _ := url.Parse(l.s.srv.URL)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "sb_session", Value: token.Reveal(), Path: "/"}})
	return c, token.Reveal()
}

// browser is a cookie-keeping browser with no Switchboard credential; at
// the authorization server it logs in as asUser.
func (l *linkSetup) browser(asUser string) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: &loginTransport{user: asUser, as: l.as.URL, bodies: l.s.bodies}}
}

// A connect link made by a trusted caller for a member connects that
// member when opened in their signed-in browser, once; a replay, an
// expired link and a link opened by another signed-in member are refused
// with a page; a browser not signed in is sent to sign in and back.
func TestConnectLinks(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		l := setupLinks(t, db)
		aliceBrowser, _ := l.signedIn(t, l.alice)
		bobBrowser, _ := l.signedIn(t, l.bob)

		st, out := l.mint(t, map[string]string{"Authorization": "Bearer " + l.platform}, l.alice.UserID)
		link, _ := out["url"].(string)
		if st != http.StatusCreated || !strings.HasPrefix(link, l.s.srv.URL+"/workspaces/acme/webhooks/crm/oauth/link?token=") {
			t.Fatalf("mint = %d %v", st, out)
		}
		if exp, _ := time.Parse(time.RFC3339Nano, out["expires_at"].(string)); exp.Sub(l.clk.now()) > 15*time.Minute || exp.Sub(l.clk.now()) < 14*time.Minute {
			t.Errorf("expires_at %v, want 15 minutes from now", out["expires_at"])
		}

		// Not signed in: to the sign-in page, which comes back to the link.
		noRedirect := *l.browser("nobody")
		noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := noRedirect.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || loc.Path != "/signin/" || !strings.Contains(loc.Query().Get("next"), "/oauth/link?token=") {
			t.Errorf("not signed in = %d to %q, want the sign-in page and back", resp.StatusCode, resp.Header.Get("Location"))
		}

		// Bob opens alice's link: refused, and the link stays usable.
		if st, page := get(t, bobBrowser, link); st != http.StatusForbidden || !strings.Contains(page, "another person") {
			t.Errorf("bob opens alice's link = %d %s", st, page)
		}
		// Alice opens it: the flow runs to the callback page.
		st, page := get(t, aliceBrowser, link)
		if st != http.StatusOK || !strings.Contains(page, "Connected") || !strings.Contains(page, "close this tab") {
			t.Fatalf("alice opens her link = %d %s", st, page)
		}
		if strings.Contains(page, "<script") || strings.Contains(page, "token") {
			t.Errorf("callback page shows a script or a token: %s", page)
		}
		if r := l.s.callTool(t, "acme", "crm", l.platform, agent, l.alice.UserID, nil, nil); r.isError || r.user != l.alice.UserID {
			t.Errorf("call as alice after connecting: %+v", r)
		}
		// Replay: refused, on any replica (the row is spent).
		if st, page := get(t, aliceBrowser, link); st != http.StatusBadRequest || !strings.Contains(page, "already used") {
			t.Errorf("replayed link = %d %s", st, page)
		}

		// Expiry: a link is good for 15 minutes.
		late := l.mintFor(t, l.bob.UserID)
		l.clk.advance(16 * time.Minute)
		if st, page := get(t, bobBrowser, late); st != http.StatusBadRequest || !strings.Contains(page, "expired") {
			t.Errorf("expired link = %d %s", st, page)
		}
		// A forged token, or a link moved to another instance's path.
		fresh := l.mintFor(t, l.bob.UserID)
		if st, _ := get(t, bobBrowser, fresh+"x"); st != http.StatusBadRequest {
			t.Errorf("forged link = %d", st)
		}
		if st, _ := get(t, bobBrowser, strings.Replace(fresh, "/crm/", "/other/", 1)); st != http.StatusBadRequest {
			t.Errorf("link on another instance's path = %d", st)
		}
		if st, page := get(t, bobBrowser, fresh); st != http.StatusOK || !strings.Contains(page, "Connected") {
			t.Errorf("bob's fresh link = %d %s", st, page)
		}
	})
}

// A browser not signed in that opens a connect link is sent to sign in;
// signing in with a one-time sign-in link brings it back to the connect
// link, whose OAuth flow then runs through the authorization server.
func TestConnectLinkSignInComesBack(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		l := setupLinks(t, db)
		link := l.mintFor(t, l.alice.UserID)
		b := l.browser(l.alice.UserID)
		var visited []string
		b.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
			visited = append(visited, req.URL.String())
			return nil
		}
		st, page := get(t, b, link)
		if st != http.StatusOK || !strings.Contains(page, "Signed out") || !strings.Contains(page, "come back here") {
			t.Fatalf("unsigned browser opens the link = %d %s", st, page)
		}

		_, token, err := l.members.LoginLink(context.Background(), "test", l.alice.Tenant, l.alice.Email, 0)
		if err != nil {
			t.Fatal(err)
		}
		visited = nil
		form := url.Values{"token": {token.Reveal()}}
		req, _ := http.NewRequest(http.MethodPost, l.s.srv.URL+signin.LinkPath, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", l.s.srv.URL)
		resp, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(visited) < 2 || visited[0] != link || !strings.HasPrefix(visited[1], l.as.URL) {
			t.Fatalf("after signing in the browser went to %q, want the connect link then the authorization server", visited)
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Connected") {
			t.Fatalf("the flow after signing in = %d %s", resp.StatusCode, body)
		}
		if r := l.s.callTool(t, "acme", "crm", l.platform, agent, l.alice.UserID, nil, nil); r.isError || r.user != l.alice.UserID {
			t.Errorf("call as alice after connecting: %+v", r)
		}
	})
}

// Who may mint a link for whom.
func TestConnectLinkMinting(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		l := setupLinks(t, db)
		_, aliceSession := l.signedIn(t, l.alice)
		cookie := "sb_session=" + aliceSession
		csrf := members.CSRFToken(aliceSession)
		cases := []struct {
			name    string
			headers map[string]string
			target  string
			status  int
			code    string
			user    string
		}{
			{"trusted caller for a member", map[string]string{"Authorization": "Bearer " + l.platform}, l.bob.UserID, 201, "", l.bob.UserID},
			{"trusted caller for a non-member", map[string]string{"Authorization": "Bearer " + l.platform}, "mallory", 404, "user_not_found", ""},
			{"trusted caller without a user", map[string]string{"Authorization": "Bearer " + l.platform}, "", 400, "user_required", ""},
			{"untrusted caller for its own user", map[string]string{"Authorization": "Bearer " + l.own}, "", 201, "", l.alice.UserID},
			{"untrusted caller for another user", map[string]string{"Authorization": "Bearer " + l.own}, l.bob.UserID, 403, "connect_link_forbidden", ""},
			{"member for themself", map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf}, "", 201, "", l.alice.UserID},
			{"member for another member", map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf}, l.bob.UserID, 403, "role_required", ""},
			{"member without the CSRF token", map[string]string{"Cookie": cookie}, "", 403, "csrf_failed", ""},
			{"no credential", nil, "", 401, "unauthorized", ""},
		}
		for _, c := range cases {
			st, out := l.mint(t, c.headers, c.target)
			e, _ := out["error"].(map[string]any)
			code, _ := e["code"].(string)
			if st != c.status || code != c.code || (c.user != "" && out["user"] != c.user) {
				t.Errorf("%s: %d %v, want %d %q user %q", c.name, st, out, c.status, c.code, c.user)
			}
		}
	})
}

// reconnect_required carries a connect link in its structured content;
// the user opens it and the agent's next call goes through.
func TestReconnectRequiredCarriesLink(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		l := setupLinks(t, db)
		r := l.s.callTool(t, "acme", "crm", l.platform, agent, l.alice.UserID, nil, nil)
		if !r.isError || r.code != "reconnect_required" {
			t.Fatalf("call before connecting: %+v", r)
		}
		var res struct {
			Result struct {
				StructuredContent struct {
					Error struct {
						ConnectURL string `json:"connectUrl"`
					} `json:"error"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(r.raw), &res); err != nil {
			t.Fatal(err)
		}
		link := res.Result.StructuredContent.Error.ConnectURL
		if !strings.HasPrefix(link, l.s.srv.URL+"/workspaces/acme/webhooks/crm/oauth/link?token=") {
			t.Fatalf("connectUrl = %q in %s", link, r.raw)
		}
		if strings.Contains(r.message, "token=") {
			t.Errorf("the link's token is in the message text: %s", r.message)
		}
		aliceBrowser, _ := l.signedIn(t, l.alice)
		if st, page := get(t, aliceBrowser, link); st != http.StatusOK || !strings.Contains(page, "Connected") {
			t.Fatalf("open the reconnect link = %d %s", st, page)
		}
		if r := l.s.callTool(t, "acme", "crm", l.platform, agent, l.alice.UserID, nil, nil); r.isError || r.user != l.alice.UserID {
			t.Errorf("call after reconnecting: %+v", r)
		}
		// The callback page of a refused consent says what happened.
		st, page := l.deniedCallback(t)
		if st != http.StatusBadRequest || !strings.Contains(page, "Nothing was connected") || strings.Contains(page, "<script") {
			t.Errorf("refused consent page = %d %s", st, page)
		}
	})
}

// deniedCallback runs a flow from a connect link whose consent the
// provider refuses, and returns the callback page.
func (l *linkSetup) deniedCallback(t *testing.T) (int, string) {
	t.Helper()
	c, _ := l.signedIn(t, l.bob)
	link := l.mintFor(t, l.bob.UserID)
	nr := *c
	nr.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := nr.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authz, _ := url.Parse(resp.Header.Get("Location"))
	q := authz.Query()
	cb := q.Get("redirect_uri") + "?" + url.Values{"state": {q.Get("state")}, "error": {"access_denied"}}.Encode()
	resp, err = c.Get(cb)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Minting a connect link leaves an audit row naming who minted it (the
// caller, or the member) and for whom, and never the link's token.
func TestConnectLinkMintingIsAudited(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		l := setupLinks(t, db)
		ctx := context.Background()
		acme, err := l.s.svc.Tenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		callers, err := l.s.svc.ListCallers(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		factory := ""
		for _, c := range callers {
			if c.Name == "factory" {
				factory = string(c.ID)
			}
		}
		_, aliceSession := l.signedIn(t, l.alice)
		var tokens []string
		for _, h := range []map[string]string{
			{"Authorization": "Bearer " + l.platform},
			{"Cookie": "sb_session=" + aliceSession, "X-CSRF-Token": members.CSRFToken(aliceSession)},
		} {
			target := ""
			if h["Cookie"] == "" {
				target = l.bob.UserID
			}
			st, out := l.mint(t, h, target)
			link, _ := out["url"].(string)
			u, err := url.Parse(link)
			if st != http.StatusCreated || err != nil || u.Query().Get("token") == "" {
				t.Fatalf("mint = %d %v", st, out)
			}
			tokens = append(tokens, u.Query().Get("token"))
		}
		want := map[[2]string]bool{{factory, l.bob.UserID}: false, {l.alice.UserID, l.alice.UserID}: false}
		var rows []audit.Entry
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if rows, err = l.s.astore.List(ctx, acme.ID, audit.Query{Instance: "crm"}); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range rows {
				if _, ok := want[[2]string{e.Actor, e.Subject}]; ok && e.Action == "connect_link.create" {
					want[[2]string{e.Actor, e.Subject}] = true
					n++
				}
			}
			if n == len(want) {
				break
			}
		}
		for pair, found := range want {
			if !found {
				t.Errorf("no connect_link.create row with actor %q and subject %q in %+v", pair[0], pair[1], rows)
			}
		}
		raw, _ := json.Marshal(rows)
		for _, tok := range tokens {
			if strings.Contains(string(raw), tok) {
				t.Error("an audit row holds a connect link's token")
			}
		}
	})
}
