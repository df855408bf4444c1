package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

// TestBrowserSignInOIDC opens the Sign in page of a server with an
// OpenID Connect issuer (the fosite server on loopback) in headless
// Chromium: the page (checked and captured as signin-oidc) offers "Sign
// in with <issuer>" besides the one-time links, and clicking it signs the
// tenant's owner in through the issuer and brings them back to the page
// they asked for, under the console's CSP.
func TestBrowserSignInOIDC(t *testing.T) {
	idp := authztest.New(t, authztest.Options{})
	const secret = "console-oidc-secret-canary-19"
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t),
		OIDCIssuers: []signin.OIDCIssuer{{Name: "corp", Label: "Corp ID", Issuer: idp.Issuer(), ClientID: "switchboard", ClientSecret: secrets.New(secret)}}})
	idp.AddClient(authztest.Client{ID: "switchboard", Secret: secret, Scopes: []string{"openid", "email"},
		RedirectURIs: []string{srv.URL + signin.OIDCIssuer{Name: "corp"}.CallbackPath()}})
	ctx := context.Background()
	tenant, err := srv.Tenants().CreateTenant(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Members().AddMember(ctx, members.ActorOperator, tenant.ID, "owner@acme.test", members.RoleOwner); err != nil {
		t.Fatal(err)
	}

	bctx := browser(t)
	dir := screenshotDir(t)
	csp := &cspReports{}
	csp.listen(bctx)
	checkPage(t, bctx, srv.URL, dir, csp, pageCheck{"signin-oidc", "/console/instances", "Sign in"})
	html, err := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("main")))
	if err != nil || !strings.Contains(html, ">Sign in with Corp ID</a>") || !strings.Contains(html, "one-time sign-in link") {
		t.Fatalf("the Sign in page lacks the issuer's button or the one-time link hint (%v):\n%s", err, html)
	}

	// The issuer signs in whom the test's login header names (its stand-in
	// for a login page); the button leads there and back.
	if _, err := chromedp.Call(bctx, network.SetExtraHTTPHeaders,
		network.SetExtraHTTPHeadersParams{Headers: network.Headers{authztest.LoginHeader: "owner@acme.test"}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, click(`ul.signin-issuers a`)); err != nil {
		t.Fatalf("clicking Sign in with Corp ID: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		loc, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`location.pathname`))
		h1, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main h1")))
		if loc == "/console/instances" && strings.Contains(h1, "Instances") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Sign in with Corp ID: at %q, heading %q", loc, h1)
		}
	}
	for _, l := range csp.take() {
		t.Errorf("signing in with the issuer: %s", l)
	}
	if n := idp.TokenRequests("authorization_code"); n != 1 {
		t.Errorf("the issuer got %d code exchanges, want 1", n)
	}
}
