package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/members"
)

// TestBrowserAudit uses the audit page and the tenant picker in headless
// Chromium against the server built by server.New, with rows made by real
// agent calls (the official MCP SDK client, through the MCP endpoint, to a
// loopback upstream): the empty state, the rows, a filter set through the
// form, paging Older and back Newer, then the picker switching the
// browser's session to another tenant of the same identity provider
// account. Each state is checked and captured at 1280 and 360 px
// (checkPage: layout, CSP, axe-core 0 serious or critical).
func TestBrowserAudit(t *testing.T) {
	p := startPicker(t)
	p.add(t, "acme", "alice@corp.test", members.RoleOwner)
	p.add(t, "globex", "alice@corp.test", members.RoleMember)
	p.signInOIDC(t, "globex", "alice@corp.test")
	p.Session = p.signInOIDC(t, "acme", "alice@corp.test")

	ctx, dir, csp := startBrowser(t)
	browseAs(t, ctx, p.consoleServer, p.Session, "alice@corp.test")
	checkPage(t, ctx, p.URL, dir, csp, pageCheck{"audit-empty", "/console/audit", "Audit"})
	if html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main"))); !strings.Contains(html, "No calls yet") {
		t.Errorf("the empty audit page lacks its empty state")
	}

	// Real calls: 55 that succeed (claude) and 5 refused by validation
	// (cursor, a required argument missing), more than one page of 50.
	const canary = "ghp_browser_audit_canary_77"
	calls := agentCalls(t, p.consoleServer, canary)
	calls.repeat(t, "claude", "repositories", map[string]any{"action": "list_mine"}, 55)
	calls.repeat(t, "cursor", "repositories", map[string]any{"action": "get", "owner": canary}, 5)
	p.Audit().Flush(context.Background())

	checkPage(t, ctx, p.URL, dir, csp, pageCheck{"audit", "/console/audit", "Audit"})
	rows := func() int {
		t.Helper()
		// The wait before (a link present or gone) can be met while the
		// next page is still being parsed: count its rows once loaded.
		if err := chromedp.Do(ctx, loaded()); err != nil {
			t.Fatal(err)
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('table.audit tbody tr').length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != 50 {
		t.Errorf("the first page shows %d rows, want 50", n)
	}

	// Paging: Older shows the other 10, Newer goes back to 50.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), click(`.pager a[rel="next"]`),
		chromedp.WaitVisible(chromedp.CSS(`.pager a[rel="prev"]`))); err != nil {
		t.Fatalf("Older: %v", err)
	}
	if n := rows(); n != 10 {
		t.Errorf("the older page shows %d rows, want 10", n)
	}
	if err := chromedp.Do(ctx, click(`.pager a[rel="prev"]`), chromedp.WaitNotPresent(chromedp.CSS(`.pager a[rel="prev"]`))); err != nil {
		t.Fatalf("Newer: %v", err)
	}
	if n := rows(); n != 50 {
		t.Errorf("back on the newest page: %d rows, want 50", n)
	}

	// A filter set with the form: cursor's failed calls.
	if err := chromedp.Do(ctx, chromedp.Navigate(p.URL+"/console/audit"), chromedp.WaitVisible(chromedp.CSS("#agent")),
		sendKeys("#agent", "cursor"), setValue("#outcome", "!ok"),
		click(`form.filters button[type="submit"]`)); err != nil {
		t.Fatalf("filtering with the form: %v", err)
	}
	waitLocation(t, ctx, "agent=cursor")
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.Contains(loc, "outcome=%21ok") {
		t.Errorf("the filter form went to %s", loc)
	}
	if n := rows(); n != 5 {
		t.Errorf("the filtered page shows %d rows, want cursor's 5", n)
	}
	checkPage(t, ctx, p.URL, dir, csp, pageCheck{"audit-filtered", "/console/audit?agent=cursor&outcome=%21ok", "Audit"})
	if html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, canary) || !strings.Contains(html, "invalid_arguments") {
		t.Errorf("the filtered page shows the canary, or not the failure's code")
	}

	// The tenant picker, and the header's tenant menu opened at both
	// widths; Alice switches to globex from the menu.
	checkPage(t, ctx, p.URL, dir, csp, pageCheck{"tenants", "/console/tenants", "Tenants"})
	for _, w := range widths {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900), chromedp.Navigate(p.URL+"/console/audit"),
			chromedp.WaitVisible(chromedp.CSS(".tenant-menu summary")), click(".tenant-menu summary"),
			chromedp.WaitVisible(chromedp.CSS(".tenant-menu button"))); err != nil {
			t.Fatalf("opening the tenant menu at %d px: %v", w, err)
		}
		checkShown(t, ctx, dir, csp, pageCheck{name: "tenant-menu", heading: "Audit"}, w)
	}
	if err := chromedp.Do(ctx, click(`.tenant-menu button`)); err != nil {
		t.Fatalf("switching: %v", err)
	}
	waitLocation(t, ctx, "/console/instances")
	waitText(t, ctx, "main", "Globex")
	if pg := p.get(t, "/console/tenants", p.Session); pg.status != 401 {
		t.Errorf("the session switched from still works: %d", pg.status)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(p.URL+"/console/tenants"), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "main .lead", "You are in Globex as member")
}

// waitLocation waits until the browser's URL contains want (a form or
// link the test clicked has navigated).
func waitLocation(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	var loc string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if loc, _ = chromedp.Run(ctx, chromedp.Location()); strings.Contains(loc, want) {
			if state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`)); err == nil && state == "complete" {
				return
			}
		}
	}
	t.Fatalf("the browser is at %s, want %s", loc, want)
}
