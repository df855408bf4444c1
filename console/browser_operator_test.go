package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
)

// TestBrowserOperator walks the operator's pages in headless Chromium:
// the operator signs in with an operator sign-in link, creates a tenant,
// registers a central OAuth provider (its secret never in a later page)
// and creates an operator token (shown once, with a working copy
// button); then a member of a tenant opens the providers page and gets
// Access restricted. Each page is checked and captured at 1280 and 360 px
// (checkPage: heading, stylesheet, no sideways scrolling, no CSP report,
// axe 0 serious or critical).
func TestBrowserOperator(t *testing.T) {
	s := startConsole(t)
	ctx, dir, csp := startBrowser(t)

	signInBrowserTo(t, ctx, signin.LinkURL(s.URL, s.operatorLink(t, 0)), "<h1>Tenants</h1>")
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); loc != s.URL+"/console/operator/tenants" {
		t.Errorf("the operator link led to %s", loc)
	}

	if err := chromedp.Do(ctx, sendKeys("#slug", "beta"), sendKeys("#name", "Beta Corp"),
		click(`form[action="/console/operator/tenants"] button[type="submit"]`),
		chromedp.WaitReady(chromedp.CSS(`input#tenant[value="beta"]`))); err != nil {
		t.Fatalf("creating a tenant through the form: %v", err)
	}
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"operator-tenants", "/console/operator/tenants", "Tenants"})

	const secret = "central_secret_typed_in_the_browser_7"
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/console/operator/providers"), chromedp.WaitVisible(chromedp.CSS("#slug")),
		sendKeys("#slug", "github"), sendKeys("#name", "GitHub"),
		sendKeys("#authorize_url", "https://github.test/login/oauth/authorize"),
		sendKeys("#token_url", "https://github.test/login/oauth/access_token"),
		sendKeys("#scopes", "repo read:user"),
		sendKeys("#client_id", "Iv1.browser"),
		sendKeys("#client_secret", secret),
		click(`form[action="/console/operator/providers"] button[type="submit"]`),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/operator/providers?delete=github"]`))); err != nil {
		t.Fatalf("registering a provider through the form: %v", err)
	}
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"operator-providers", "/console/operator/providers", "OAuth providers"})
	for _, path := range []string{"/console/operator/providers", "/console/operator/providers?edit=github"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+path), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
			t.Fatal(err)
		}
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil || strings.Contains(html, secret) || strings.Contains(html, "Iv1.browser") || !strings.Contains(html, "Client secret set") && path == "/console/operator/providers" {
			t.Errorf("%s: the typed secret or client id is in the page, or the secret is not shown as set (%v)", path, err)
		}
	}

	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(s.URL+"/console/operator/tokens"), chromedp.WaitVisible(chromedp.CSS("#name")),
		sendKeys("#name", "terraform"),
		click(`form[action="/console/operator/tokens"] button[type="submit"]`),
		// copy.js ran under the CSP: it shows the copy button.
		chromedp.WaitVisible(chromedp.CSS(`button.copy[data-copy="once-value"]`))); err != nil {
		t.Fatalf("creating an operator token: the token's copy button is not shown: %v", err)
	}
	token, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('once-value').value`))
	if err != nil || !s.Operators().Verify(context.Background(), token) {
		t.Fatalf("the token shown once does not work (%v)", err)
	}
	for _, v := range axe(t, ctx) {
		t.Errorf("operator token created: axe %s (%s): %s at %v", v.ID, v.Impact, v.Help, v.Nodes)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "operator-token-created-1280.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"operator-tokens", "/console/operator/tokens", "Operator tokens"})
	if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err != nil || strings.Contains(html, token) || !strings.Contains(html, "terraform") {
		t.Errorf("the token list shows the token again, or not its name (%v)", err)
	}

	// A member of acme signs in in the same browser (ending the operator's
	// session) and opens the maintainer view.
	tenant, err := s.Tenants().Tenant(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Members().AddMember(context.Background(), members.ActorOperator, tenant.ID, "member@acme.test", members.RoleMember); err != nil {
		t.Fatal(err)
	}
	_, link, err := s.Members().LoginLink(context.Background(), members.ActorOperator, tenant.ID, "member@acme.test", 0)
	if err != nil {
		t.Fatal(err)
	}
	signInBrowser(t, ctx, signin.LinkURL(s.URL, link.Reveal()))
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"access-restricted", "/console/operator/providers", "Access restricted"})
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil || strings.Contains(html, "github.test") || strings.Contains(html, "Register a provider") || strings.Contains(html, "<form class=\"form\"") {
		t.Errorf("a member's Access restricted page shows the maintainer view (%v)", err)
	}
}
