package console_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/members"
)

// TestBrowserPeople uses the callers, API keys and members pages in
// headless Chromium as the owner does: creates a caller and sees its
// token with a working copy button, creates an API key (which then works
// against /v1), invites a member, changes their role and removes them.
// Every page, including the one-time answers of the creations, is
// checked and captured at 1280 and 360 px (checkPage); the copy button
// is reached with the keyboard and visibly focused; no list page shows a
// secret created before it.
func TestBrowserPeople(t *testing.T) {
	s := startConsole(t)
	ctx, dir, csp := startBrowser(t)
	signInBrowser(t, ctx, s.loginLink(t))
	bg := context.Background()
	tenant := s.acme(t)

	// do runs browser steps at desktop width, failing the test on error.
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, append([]chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(1280, 900)}, steps...)...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	value := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(sel)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// create fills the form of the page at path, submits it and returns
	// the secret the answer shows in the read-only input out, whose copy
	// button copy.js must show.
	create := func(what, path string, out string, fill ...chromedp.Action[chromedp.Void]) string {
		t.Helper()
		steps := append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(s.URL + path), chromedp.WaitVisible(chromedp.CSS("main h1"))}, fill...)
		do(what, append(steps, click(`section.panel form button[type="submit"]`),
			chromedp.WaitVisible(chromedp.CSS("#"+out)), chromedp.WaitVisible(chromedp.CSS(`button.copy[data-copy="`+out+`"]`)))...)
		return value("#" + out)
	}
	var secrets []string
	noSecrets := func(name string) {
		t.Helper()
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range secrets {
			if strings.Contains(html, sec) {
				t.Errorf("%s shows a secret created earlier", name)
			}
		}
	}

	// Callers: the empty state, then one created through the form.
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"callers-empty", "/console/callers", "Callers"})
	token := create("creating a caller", "/console/callers", "caller-token",
		sendKeys("#caller-name", "agent-factory"),
		click("#kind-agent-platform"),
		click("#trusted"),
		click("#mode-header"))
	if _, err := s.Tenants().Store().CallerByToken(bg, token); err != nil {
		t.Fatalf("the token shown is not the caller's: %v", err)
	}
	secrets = append(secrets, token)
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"caller-created", "", "Caller created"})

	t.Run("copy button by keyboard", func(t *testing.T) {
		// Tab from the top of the page until the copy button has focus:
		// it is reachable, and its focus is visible.
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); window.scrollTo(0, 0)`)); err != nil {
			t.Fatal(err)
		}
		reached := false
		for i := 0; i < 40 && !reached; i++ {
			if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
				t.Fatal(err)
			}
			on, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.activeElement.matches('button.copy[data-copy="caller-token"]')`))
			if err != nil {
				t.Fatal(err)
			}
			reached = on
		}
		if !reached {
			t.Fatal("Tab never reaches the copy button")
		}
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = getComputedStyle(document.activeElement);
			return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2 })()`))
		if err != nil || !shown {
			t.Errorf("the focused copy button has no visible focus outline (%v)", err)
		}
		if err := chromedp.Do(ctx, chromedp.KeyEvent("\r")); err != nil {
			t.Fatal(err)
		}
		// Copied, or (where the browser refuses the clipboard) how to copy
		// by hand: either way the status says what happened.
		if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.querySelector('#caller-token ~ .copy-status').textContent !== ''`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Errorf("the copy button's status stays empty: %v", err)
		}
	})

	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"callers", "/console/callers", "Callers"})
	noSecrets("callers")

	// API keys: created through the form; the key shown works on /v1.
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"api-keys-empty", "/console/api-keys", "API keys"})
	key := create("creating an API key", "/console/api-keys", "api-key",
		sendKeys("#key-name", "CI deploy"),
		click("#key-role-member"))
	secrets = append(secrets, key)
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"api-key-created", "", "API key created"})
	if st := s.v1(t, "/v1/tenants/acme/instances", key); st != 200 {
		t.Fatalf("the API key created in the browser against /v1: status %d, want 200", st)
	}
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"api-keys", "/console/api-keys", "API keys"})
	noSecrets("api-keys")

	// Members: invite, the invited person joins with the link, an owner
	// changes their role, then removes them.
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"members-alone", "/console/members", "Members"})
	link, err := url.Parse(create("inviting", "/console/members", "invitation-link",
		sendKeys("#invite-email", "mia@acme.test"),
		click("#invite-role-member")))
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, link.Query().Get("token"))
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"invitation-created", "", "Invitation created"})
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"members-invited", "/console/members", "Members"})
	noSecrets("members")
	mia, err := s.Members().Redeem(bg, link.Query().Get("token"))
	if err != nil {
		t.Fatalf("the invitation link shown does not work: %v", err)
	}
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"members", "/console/members", "Members"})

	do("changing a role", chromedp.Navigate(s.URL+"/console/members"), chromedp.WaitVisible(chromedp.CSS("#role-"+mia.UserID)),
		setValue("#role-"+mia.UserID, "admin"),
		click(`form[action="/console/members/`+mia.UserID+`/role"] button`),
		// The page the change redirects to renders the new role selected.
		chromedp.WaitReady(chromedp.CSS(`#role-`+mia.UserID+` option[value="admin"][selected]`)))
	if m, err := s.Members().Member(bg, tenant.ID, mia.UserID); err != nil || m.Role != members.RoleAdmin {
		t.Fatalf("role after the change in the browser: %v (%v)", m.Role, err)
	}

	do("opening the removal", chromedp.Navigate(s.URL+"/console/members"),
		click(`a[href="/console/members/`+mia.UserID+`/remove"]`),
		chromedp.WaitVisible(chromedp.CSS("#grants-revoke")))
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"member-remove", "/console/members/" + mia.UserID + "/remove", "Remove mia@acme.test?"})
	do("removing", click(`form button.danger[type="submit"]`),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/members"].button`)))
	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"member-removed", "", "mia@acme.test removed"})
	if _, err := s.Members().Member(bg, tenant.ID, mia.UserID); err == nil {
		t.Fatal("the member removed in the browser is still a member")
	}
}
