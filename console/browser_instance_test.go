package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/members"
)

// browseAs makes the browser the person of session: the console's
// session cookie on the server's host, and, at the authorization
// server, its stand-in login header for login.
func browseAs(t *testing.T, ctx context.Context, s *consoleServer, session, login string) {
	t.Helper()
	httpOnly := true
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: s.SignIn().SessionCookie(), Value: session,
			URL: s.URL + "/", Path: "/", HTTPOnly: &httpOnly, SameSite: network.CookieSameSiteLax}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{authztest.LoginHeader: login}})
		return err
	}))
	if err != nil {
		t.Fatalf("browsing as %s: %v", login, err)
	}
}

// waitText waits until the element sel's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.AtLeast(0)))
		if got = v; err == nil && strings.Contains(v, want) {
			return
		}
	}
	t.Fatalf("%s says %q, want %q", sel, got, want)
}

// tabTo presses Tab until the element with id has the focus, from the
// top of the page, and fails when it is not reached.
func tabTo(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	for range 60 {
		if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`)); err == nil && got == id {
			return
		}
	}
	t.Fatalf("Tab never reaches #%s", id)
}

// TestBrowserInstance uses the instance page in headless Chromium
// against the server built by server.New: the admin edits the agent
// allowlist and runs Test connection against a loopback upstream; a
// member connects their own account through the real authorization
// server (fosite, on loopback), sees it connected, and disconnects it.
// Every page state is checked and captured at 1280 and 360 px
// (checkPage: layout, CSP, axe-core; a form's answer where it is).
func TestBrowserInstance(t *testing.T) {
	s := startNotes(t)
	as := installOAuth(t, s, authztest.Options{})
	up := notesUpstream(t, as)
	installKey(t, s, up.URL, "bot")
	miaID, member := s.sessionAs(t, "member@acme.test", members.RoleMember)
	// Recent calls to show: one of the member's, one of someone else's.
	tenant := s.acme(t)
	now := time.Now().UTC()
	var rows []audit.Entry
	for i, slug := range []string{"notes", "notes-key"} {
		rows = append(rows,
			audit.Entry{ID: fmt.Sprintf("b%da", i), Time: now, Tenant: tenant.ID, Instance: slug, Agent: "bot", Actor: miaID, Subject: miaID,
				Tool: "me", Action: "get", Outcome: "ok", Status: 200},
			audit.Entry{ID: fmt.Sprintf("b%db", i), Time: now.Add(-time.Minute), Tenant: tenant.ID, Instance: slug, Agent: "ci-bot",
				Actor: "external-user-7", Subject: "external-user-7", Tool: "me", Action: "get", Outcome: "upstream_error", Status: 502})
	}
	if err := s.AuditStore().Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	ctx, dir, csp := startBrowser(t)

	browseAs(t, ctx, s, s.Session, "owner@acme.test")
	for _, p := range []pageCheck{
		{"instance-admin", "/console/instances/notes-key", "notes-key"},
		{"instance-admin-oauth", "/console/instances/notes", "notes"},
		{"install-oauth", "/console/catalog/notes/install", "Install Notes"},
		{"instance-delete", "/console/instances/notes-key/delete", "Delete notes-key?"},
	} {
		checkPage(t, ctx, s.URL, dir, csp, p)
	}
	// The oauth callback URL's copy button runs under the CSP.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/console/catalog/notes/install"),
		chromedp.WaitVisible(chromedp.CSS(`button.copy[data-copy="callback-url"]`))); err != nil {
		t.Errorf("the callback URL's copy button is not shown: %v", err)
	}

	// The admin adds an agent with the allowlist editor.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(360, 900), chromedp.Navigate(s.URL+"/console/instances/notes-key"),
		chromedp.WaitVisible(chromedp.CSS("#add-agent")), sendKeys("#add-agent", "ci-bot"),
		click(`.inline-form button[type="submit"]`), chromedp.WaitVisible(chromedp.CSS(".notice"))); err != nil {
		t.Fatalf("adding an agent: %v", err)
	}
	waitText(t, ctx, ".notice", "allowlist is saved")
	if got := agentsOf(t, s, "notes-key"); got != "bot,ci-bot" {
		t.Fatalf("after adding in the browser the allowlist is %q", got)
	}
	// A bad agent id: the typed error on the page, nothing changed.
	if err := chromedp.Do(ctx, sendKeys("#add-agent", "no spaces allowed"),
		click(`.inline-form button[type="submit"]`), chromedp.WaitVisible(chromedp.CSS("#problem"))); err != nil {
		t.Fatalf("adding a bad agent id: %v", err)
	}
	waitText(t, ctx, "#problem", "invalid_agents")
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"instance-agent-error", "", "notes-key"})
	if got := agentsOf(t, s, "notes-key"); got != "bot,ci-bot" {
		t.Fatalf("a refused agent id changed the allowlist to %q", got)
	}

	// Test connection reaches the loopback upstream with the stored key.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/console/instances/notes-key"),
		chromedp.WaitVisible(chromedp.CSS("#run-test")), click("#run-test"),
		chromedp.WaitVisible(chromedp.CSS("#test-result"))); err != nil {
		t.Fatalf("test connection: %v", err)
	}
	waitText(t, ctx, "#test-result", "Passed")
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"instance-test", "", "notes-key"})

	// The member connects their own account.
	browseAs(t, ctx, s, member, "member@acme.test")
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"instance-member", "/console/instances/notes", "notes"})
	waitText(t, ctx, "#grant-state", "Not connected")
	// With the keyboard alone: Tab to Connect, Enter, then the link on.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/console/instances/notes"), chromedp.WaitVisible(chromedp.CSS("#connect"))); err != nil {
		t.Fatal(err)
	}
	tabTo(t, ctx, "connect")
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("#continue"))); err != nil {
		t.Fatalf("connect: %v", err)
	}
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"instance-connect", "", "Connect your Notes account"})
	tabTo(t, ctx, "continue")
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`a[href$="/console/instances/notes"]`))); err != nil {
		t.Fatalf("through the authorization server: %v", err)
	}
	waitText(t, ctx, "h1", "Connected")
	if err := chromedp.Do(ctx, click(`a[href$="/console/instances/notes"]`), chromedp.WaitVisible(chromedp.CSS("#grant-state"))); err != nil {
		t.Fatalf("back to the instance page: %v", err)
	}
	waitText(t, ctx, "#grant-state", "Connected")
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"instance-member-connected", "/console/instances/notes", "notes"})
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if !strings.Contains(html, "member@acme.test") || strings.Contains(html, "external-user-7") {
		t.Error("the member's recent calls are not exactly their own")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(as.Issued()) == 0 {
		t.Fatal("the authorization server issued no token")
	}
	for _, tok := range as.Issued() {
		if strings.Contains(html, tok) {
			t.Error("the member's page shows one of their tokens")
		}
	}

	// And disconnects it.
	if err := chromedp.Do(ctx, click("#disconnect"), chromedp.WaitVisible(chromedp.CSS(".notice"))); err != nil {
		t.Fatalf("disconnect: %v", err)
	}
	waitText(t, ctx, "#grant-state", "Not connected")
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"instance-member-disconnected", "/console/instances/notes?done=disconnected", "notes"})
}
