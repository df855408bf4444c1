package console_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

// journeyCatalog is the built-in github connector and the notes
// connector, whose users connect their own accounts.
func journeyCatalog(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	for name, content := range notesCatalog {
		files[name] = content
	}
	err := fs.WalkDir(catalog.FS(), "github", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(catalog.FS(), p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// githubUpstream stands in for the GitHub API on loopback: it answers
// every path with a repository and records the Authorization headers it
// was sent.
type githubUpstream struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newGitHubUpstream(t *testing.T) *githubUpstream {
	u := &githubUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id": 1, "login": "octocat", "name": "hello-world", "full_name": "octocat/hello-world", "private": false}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *githubUpstream) saw(auth string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.auths {
		if a == auth {
			return true
		}
	}
	return false
}

// TestBrowserJourney is issue 12's whole journey in headless Chromium,
// against the real server (server.New) on the embedded store, with the
// fosite server on loopback as both the OpenID Connect provider and the
// notes vendor's authorization server. Every step a person takes is a
// click or keystroke in the console:
//
//   - the operator opens the first start's sign-in link, creates tenant
//     acme, invites its owner and opens the invitation in the same browser
//     (the operator's session ends);
//   - the owner signs out and in again with "Sign in with Corp ID",
//     installs github against a loopback upstream (typing its token and
//     API URL), adds triage-bot to the allowlist, installs notes with the
//     tenant's own OAuth client (typing its client secret), creates an
//     agent platform caller and reads its token from the page;
//   - the agent, the official MCP SDK client with that token, calls
//     repositories on github; its row appears in the audit page filtered
//     by the instance;
//   - the owner invites a member, who signs in with the invitation link
//     read from the page, connects their notes account through the
//     authorization server, sees it connected, and disconnects;
//   - the member gets role_required on github's configuration and Access
//     restricted on the maintainer view.
//
// The HTML of every page shown after the first secret was typed is
// collected: neither secret is ever in it.
func TestBrowserJourney(t *testing.T) {
	as := authztest.New(t, authztest.Options{})
	const oidcSecret = "journey-oidc-client-secret-3"
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t), ConnectorCatalog: registrytest.Load(t, journeyCatalog(t)),
		OIDCIssuers: []signin.OIDCIssuer{{Name: "corp", Label: "Corp ID", Issuer: as.Issuer(), ClientID: "switchboard", ClientSecret: secrets.New(oidcSecret)}}})
	as.AddClient(authztest.Client{ID: "switchboard", Secret: oidcSecret, Scopes: []string{"openid", "email"},
		RedirectURIs: []string{srv.URL + signin.OIDCIssuer{Name: "corp"}.CallbackPath()}})
	const notesClientSecret = "notes_client_secret_typed_in_journey_5"
	as.AddClient(authztest.Client{ID: "acme-notes", Secret: notesClientSecret, Scopes: []string{"notes.read"},
		RedirectURIs: []string{srv.URL + "/workspaces/acme/webhooks/notes/oauth/callback"}})
	notesAPI := notesUpstream(t, as)
	github := newGitHubUpstream(t)
	ctx, dir, csp := startBrowser(t)
	bg := context.Background()

	const githubToken = "ghp_typed_into_the_journey_8d1f"
	secretTyped := false
	var seen []string // the HTML of every page shown once a secret was typed
	look := func(what string) string {
		t.Helper()
		// A click may have started a navigation: read the page once it
		// has loaded.
		var (
			html string
			err  error
		)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var state string
			if state, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`)); err == nil && state == "complete" {
				if html, err = chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: reading the page: %v", what, err)
			}
		}
		if secretTyped {
			seen = append(seen, what+"\n"+html)
		}
		return html
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) string {
		t.Helper()
		if err := chromedp.Do(ctx, append([]chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(1280, 900)}, steps...)...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return look(what)
	}
	// waitPage waits for the page the last step led to: its h1 contains want.
	waitPage := func(what, want string) string {
		t.Helper()
		var h1 string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`))
			h1, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('main h1') || document.querySelector('h1') || {}).textContent || ''`))
			if state == "complete" && strings.Contains(h1, want) {
				return look(what)
			}
		}
		t.Fatalf("%s: the page's heading is %q, want %q", what, h1, want)
		return ""
	}
	setLogin := func(email string) {
		t.Helper()
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders,
			network.SetExtraHTTPHeadersParams{Headers: network.Headers{authztest.LoginHeader: email}}); err != nil {
			t.Fatal(err)
		}
	}

	// 1. The operator: the first start's link (what serve prints), a
	// tenant, its owner's invitation opened in this browser.
	_, first, err := srv.Members().FirstStartLink(bg, "first start")
	if err != nil {
		t.Fatal(err)
	}
	signInBrowserTo(t, ctx, signin.LinkURL(srv.URL, first.Reveal()), "<h1>Tenants</h1>")
	do("creating the tenant", sendKeys("#slug", "acme"), sendKeys("#name", "Acme"),
		click(`form[action="/console/operator/tenants"] button[type="submit"]`),
		chromedp.WaitReady(chromedp.CSS(`input#tenant[value="acme"]`)))
	do("inviting the owner", sendKeys("#email", "owner@acme.test"),
		click(`form[action="/console/operator/tenants/invite"] button[type="submit"]`),
		chromedp.WaitVisible(chromedp.CSS("#once-open")))
	checkPage(t, ctx, srv.URL, dir, csp, pageCheck{"journey-owner-invited", "", "Tenants"})
	operatorCookie := sessionCookie(t, ctx, srv)
	do("opening the invitation here", click("#once-open"),
		chromedp.WaitVisible(chromedp.CSS(`form button[type="submit"]`)), click(`form button[type="submit"]`))
	if html := waitPage("signed in as the owner", "Instances"); !strings.Contains(html, "owner@acme.test") {
		t.Fatal("the invitation opened in the operator's browser did not lead to the owner's console")
	}
	if _, err := srv.Members().ResolveOperatorSession(bg, operatorCookie); err == nil {
		t.Fatal("the operator's session outlived the owner's sign-in in the same browser")
	}
	if c := sessionCookie(t, ctx, srv); c == operatorCookie || c == "" {
		t.Fatal("the browser kept the operator's session cookie")
	}

	// 2. The owner signs in again with the identity provider.
	setLogin("owner@acme.test")
	do("signing out", chromedp.Navigate(srv.URL+"/console/instances"), chromedp.WaitVisible(chromedp.CSS(".who")),
		click(`.who button[type="submit"]`), chromedp.WaitNotPresent(chromedp.CSS(".who")))
	do("signing in with Corp ID", chromedp.Navigate(srv.URL+"/console/instances"), chromedp.WaitVisible(chromedp.CSS(`ul.signin-issuers a`)),
		click(`ul.signin-issuers a`))
	if html := waitPage("the owner's instances", "Instances"); !strings.Contains(html, "owner@acme.test") {
		t.Fatal("after Sign in with Corp ID the console is not the owner's")
	}

	// 3. github against the loopback upstream; its token typed in the form.
	do("installing github", chromedp.Navigate(srv.URL+"/console/catalog/github"), chromedp.WaitVisible(chromedp.CSS(`a[href="/console/catalog/github/install"]`)),
		click(`a[href="/console/catalog/github/install"]`), chromedp.WaitVisible(chromedp.CSS("#field-GITHUB_TOKEN")),
		sendKeys("#field-GITHUB_TOKEN", githubToken))
	secretTyped = true
	do("saving github", clearField("#field-GITHUB_API_URL"),
		sendKeys("#field-GITHUB_API_URL", github.URL),
		click(`form.form button[type="submit"]`), chromedp.WaitVisible(chromedp.CSS("#add-agent")))
	do("adding triage-bot", sendKeys("#add-agent", "triage-bot"),
		click(`.inline-form button[type="submit"]`), chromedp.WaitVisible(chromedp.CSS(".notice")))
	waitText(t, ctx, ".notice", "allowlist is saved")
	checkPage(t, ctx, srv.URL, dir, csp, pageCheck{"journey-instance", "/console/instances/github", "github"})
	look("the github instance")

	// notes with the tenant's own OAuth client; its secret typed too.
	do("installing notes", chromedp.Navigate(srv.URL+"/console/catalog/notes/install"), chromedp.WaitVisible(chromedp.CSS("#mode-oauth")),
		click("#mode-oauth"),
		sendKeys("#field-API_URL", notesAPI.URL),
		sendKeys("#field-CLIENT_ID", "acme-notes"),
		sendKeys("#field-CLIENT_SECRET", notesClientSecret),
		sendKeys("#field-AUTHORIZE_URL", as.AuthorizeURL()),
		sendKeys("#field-TOKEN_URL", as.TokenURL()),
		sendKeys("#agents", "notes-bot"),
		click(`form.form button[type="submit"]`), chromedp.WaitVisible(chromedp.CSS("#add-agent")))

	// 4. A caller, whose token the page shows once.
	do("creating a caller", chromedp.Navigate(srv.URL+"/console/callers"), chromedp.WaitVisible(chromedp.CSS("#caller-name")),
		sendKeys("#caller-name", "agent-factory"), click("#kind-agent-platform"),
		click(`form[action="/console/callers"] button[type="submit"]`), chromedp.WaitVisible(chromedp.CSS("#caller-token")))
	callerToken, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#caller-token")))
	if err != nil || callerToken == "" {
		t.Fatalf("the caller's token is not on the page (%v)", err)
	}

	// 5. The agent calls github with the official MCP SDK client.
	client := mcp.NewClient(&mcp.Implementation{Name: "triage-bot", Version: "1.0.0"}, nil)
	cs, err := client.Connect(bg, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/workspaces/acme/webhooks/github.mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Timeout: 20 * time.Second, Transport: agentHeaders{"Authorization": "Bearer " + callerToken, "X-Agent-Id": "triage-bot"}}}, nil)
	if err != nil {
		t.Fatalf("the agent's initialize: %v", err)
	}
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "repositories", Arguments: map[string]any{"action": "get", "owner": "octocat", "repo": "hello-world"}})
	cs.Close()
	if err != nil || res.IsError {
		t.Fatalf("the agent's tools/call: %+v, %v", res, err)
	}
	if !github.saw("Bearer " + githubToken) {
		t.Error("the upstream never got the token typed into the form")
	}

	// Its row in the audit page, filtered by the instance with the form
	// (rows are written in the background: the owner reloads).
	do("filtering the audit", chromedp.Navigate(srv.URL+"/console/audit"), chromedp.WaitVisible(chromedp.CSS("#instance")),
		setValue("#instance", "github"), click(`form.filters button[type="submit"]`),
		chromedp.WaitVisible(chromedp.CSS("main h1")))
	// The old page's h1 is visible too until the form's answer replaces
	// it: wait for the filtered address before reading the page.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if loc, _ := chromedp.Run(ctx, chromedp.Location()); strings.Contains(loc, "instance=github") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("submitting the audit filter did not load the filtered page")
		}
	}
	do("the filtered audit page", chromedp.WaitVisible(chromedp.CSS("main h1")))
	filtered := ""
	for deadline := time.Now().Add(15 * time.Second); ; {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		html := look("the audit page")
		if _, rows, ok := strings.Cut(html, `<table class="list audit">`); ok && strings.Contains(rows, "triage-bot") {
			filtered = loc
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's call is not in the audit page filtered by github (%s):\n%s", loc, html)
		}
		time.Sleep(200 * time.Millisecond)
		do("reloading the audit", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("main h1")))
	}
	if !strings.Contains(filtered, "instance=github") {
		t.Errorf("the audit page is at %s, not filtered by the instance", filtered)
	}
	if html := look("the audit page"); !strings.Contains(html, "repositories") {
		t.Error("the audit row does not name the tool")
	}
	checkPage(t, ctx, srv.URL, dir, csp, pageCheck{"journey-audit", "", "Audit"})

	// 6. A member, invited on the members page, signs in with the link
	// read from the page (in the same browser: the owner's session ends).
	do("inviting a member", chromedp.Navigate(srv.URL+"/console/members"), chromedp.WaitVisible(chromedp.CSS("#invite-email")),
		sendKeys("#invite-email", "member@acme.test"), click("#invite-role-member"),
		click(`form[action="/console/members/invitations"] button[type="submit"]`),
		chromedp.WaitVisible(chromedp.CSS("#invitation-link")))
	invitation, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#invitation-link")))
	if err != nil || !strings.HasPrefix(invitation, srv.URL+signin.LinkPath) {
		t.Fatalf("the invitation link on the page: %q (%v)", invitation, err)
	}
	signInBrowser(t, ctx, invitation)
	look("signed in as the member")

	// The member connects their notes account through the authorization
	// server, sees it, and disconnects.
	setLogin("member@acme.test")
	do("the member's notes", chromedp.Navigate(srv.URL+"/console/instances/notes"), chromedp.WaitVisible(chromedp.CSS("#grant-state")))
	waitText(t, ctx, "#grant-state", "Not connected")
	do("connecting", click("#connect"), chromedp.WaitVisible(chromedp.CSS("#continue")),
		click("#continue"), chromedp.WaitVisible(chromedp.CSS(`a[href$="/console/instances/notes"]`)))
	waitText(t, ctx, "h1", "Connected")
	do("back to notes", click(`a[href$="/console/instances/notes"]`), chromedp.WaitVisible(chromedp.CSS("#grant-state")))
	waitText(t, ctx, "#grant-state", "Connected")
	checkPage(t, ctx, srv.URL, dir, csp, pageCheck{"journey-member-connected", "", "notes"})
	do("disconnecting", click("#disconnect"), chromedp.WaitVisible(chromedp.CSS(".notice")))
	waitText(t, ctx, "#grant-state", "Not connected")
	look("disconnected")

	// 7. What the member may not open.
	do("the member opens github's configuration", chromedp.Navigate(srv.URL+"/console/catalog/github/install?instance=github"),
		chromedp.WaitVisible(chromedp.CSS("main h1")))
	if html := look("role_required"); !strings.Contains(html, "role_required") || strings.Contains(html, `id="field-GITHUB_API_URL"`) {
		t.Error("a member opening the instance's configuration is not refused with role_required")
	}
	checkPage(t, ctx, srv.URL, dir, csp, pageCheck{"journey-member-restricted", "/console/operator/providers", "Access restricted"})
	look("the maintainer view")

	for _, page := range seen {
		for _, secret := range []string{githubToken, notesClientSecret} {
			if strings.Contains(page, secret) {
				what, _, _ := strings.Cut(page, "\n")
				t.Errorf("a secret typed into a form is in a later page: %s", what)
			}
		}
	}
	if len(seen) < 15 {
		t.Errorf("only %d pages collected after the secret was typed", len(seen))
	}
	for _, l := range csp.take() {
		t.Errorf("the journey: %s", l)
	}
}

// sessionCookie returns the browser's session cookie on the server.
func sessionCookie(t *testing.T, ctx context.Context, srv *servertest.Server) string {
	t.Helper()
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{srv.URL + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies.Cookies {
		if c.Name == srv.SignIn().SessionCookie() {
			return c.Value
		}
	}
	return ""
}
