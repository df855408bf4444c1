package console_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/chromiumtest"
)

// axeSource is axe-core (npm axe-core, version in testdata/axe/VERSION,
// MPL-2.0: testdata/axe/LICENSE), vendored for this test only.
//
//go:embed testdata/axe/axe.min.js
var axeSource string

// widths are the viewport widths every page is checked and captured at:
// a desktop and the narrowest phone the console supports.
var widths = []int64{1280, 360}

// screenshotDir is where the pages' screenshots go:
// $SWITCHBOARD_SCREENSHOTS (which .ci/run sets to a folder CI keeps), or
// switchboard-screenshots in the system's temporary directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SWITCHBOARD_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "switchboard-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts one headless Chromium for the test binary's pages,
// on loopback only (chromiumtest.Start).
func browser(t *testing.T) context.Context {
	t.Helper()
	return chromiumtest.Start(t, 3*time.Minute)
}

// loaded waits until the page's document has loaded (readyState
// complete). Chrome sends the driver the whole document again at
// DOMContentLoaded (DOM.documentUpdated), which makes every node id
// found before it stale: a click or a keystroke sent to a node found
// while a page still loads fails with "Could not find node with given
// id". That is why the tests act on nodes only through click, sendKeys,
// clear and setValue, which wait for it first.
func loaded() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		deadline := time.Now().Add(15 * time.Second)
		for {
			state, err := chromedp.Evaluate[string](`document.readyState`)(ctx, tg)
			if err == nil && state == "complete" {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the page did not finish loading (readyState %q, %v)", state, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// click clicks the first node sel matches, once the page has loaded.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(loaded(), chromedp.Click(chromedp.CSS(sel)))
}

// sendKeys types v into the first node sel matches, once the page has
// loaded.
func sendKeys(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(loaded(), chromedp.SendKeys(chromedp.CSS(sel), v))
}

// clearField empties the first field sel matches, once the page has loaded.
func clearField(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(loaded(), chromedp.Clear(chromedp.CSS(sel)))
}

// setValue sets the value of the first field sel matches, once the page
// has loaded.
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(loaded(), chromedp.SetValue(chromedp.CSS(sel), v))
}

// cspReports collects what the page logs about its Content Security
// Policy: any such line means a page relies on something the policy
// blocks.
type cspReports struct {
	mu    sync.Mutex
	lines []string
}

func (r *cspReports) listen(ctx context.Context) {
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if strings.Contains(m.Text, "Content Security Policy") {
				r.mu.Lock()
				r.lines = append(r.lines, m.Text)
				r.mu.Unlock()
			}
		}
	}()
}

func (r *cspReports) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

// axeViolation is one serious or critical finding of axe-core.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeRun runs axe-core on the current page (WCAG 2.1 A and AA and best
// practices) and returns its serious and critical violations.
const axeRun = `(async () => {
  const r = await axe.run(document, {resultTypes: ['violations']});
  return JSON.stringify(r.violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' '))})));
})()`

// pageCheck is what is asserted about one page in the browser.
type pageCheck struct {
	name, path string
	// heading is the text of the page's h1.
	heading string
}

// checkPage opens path at each width (an empty path: the page the
// browser shows, such as a POST's answer) and checks it: its heading, the
// stylesheet applied under the CSP, no horizontal scrolling, no CSP
// report, 0 serious or critical axe violations; and captures it.
func checkPage(t *testing.T, ctx context.Context, base, dir string, csp *cspReports, p pageCheck) {
	t.Helper()
	for _, w := range widths {
		open := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(w, 900)}
		if p.path != "" {
			open = append(open, chromedp.Navigate(base+p.path))
		}
		if err := chromedp.Do(ctx, append(open, chromedp.WaitVisible(chromedp.CSS("main h1")))...); err != nil {
			t.Fatalf("%s at %d px: %v", p.name, w, err)
		}
		checkShown(t, ctx, dir, csp, p, w)
	}
}

// checkShown runs checkPage's checks on the page the browser shows at
// width w, once it has finished loading, and captures it.
func checkShown(t *testing.T, ctx context.Context, dir string, csp *cspReports, p pageCheck, w int64) {
	t.Helper()
	// A page shown by a click may still be loading its stylesheet.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`))
		if err == nil && state == "complete" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s at %d px: the page did not finish loading (%q, %v)", p.name, w, state, err)
		}
	}
	h1, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main h1")))
	if err != nil || !strings.Contains(h1, p.heading) {
		t.Errorf("%s at %d px: heading %q (%v), want %q", p.name, w, h1, err, p.heading)
	}
	// The header's colour comes from console.css: proof that the
	// stylesheet loaded under the CSP.
	bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('header.top')).backgroundColor`))
	if err != nil || bg != "rgb(31, 78, 140)" {
		t.Errorf("%s at %d px: the stylesheet did not apply (header background %q, %v)", p.name, w, bg, err)
	}
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	if err != nil || overflow {
		t.Errorf("%s at %d px: the page scrolls sideways (%v)", p.name, w, err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("%s at %d px: screenshot: %v", p.name, w, err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.png", p.name, w)), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range axe(t, ctx) {
		t.Errorf("%s at %d px: axe %s (%s): %s at %v", p.name, w, v.ID, v.Impact, v.Help, v.Nodes)
	}
	for _, l := range csp.take() {
		t.Errorf("%s at %d px: %s", p.name, w, l)
	}
}

// startBrowser starts the browser of a test, with its screenshot
// directory and its listener of CSP reports.
func startBrowser(t *testing.T) (context.Context, string, *cspReports) {
	t.Helper()
	ctx := browser(t)
	dir := screenshotDir(t)
	csp := &cspReports{}
	csp.listen(ctx)
	t.Logf("screenshots in %s", dir)
	return ctx, dir, csp
}

// signInBrowser signs the browser in with a one-time sign-in link, as a
// person does: the link, its confirmation form, then the console.
func signInBrowser(t *testing.T, ctx context.Context, link string) {
	t.Helper()
	signInBrowserTo(t, ctx, link, "Signed in")
}

// signInBrowserTo opens a one-time sign-in link and confirms it, then
// waits for the page it leads to: one whose HTML contains want.
func signInBrowserTo(t *testing.T, ctx context.Context, link, want string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS(`form button[type="submit"]`)),
		click(`form button[type="submit"]`)); err != nil {
		t.Fatalf("signing in through a one-time link: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err == nil && strings.Contains(html, want) {
			// Nodes found before the page has loaded go stale (loaded).
			if err = chromedp.Do(ctx, loaded()); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the sign-in link's form: %v\n%s", err, html)
		}
	}
}

// axe injects axe-core into the page and runs it.
func axe(t *testing.T, ctx context.Context) []axeViolation {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](axeSource+";\ntrue")); err != nil {
		t.Fatalf("injecting axe-core: %v", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("running axe-core: %v", err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("axe-core's result: %v", err)
	}
	return vs
}

// TestBrowser opens every console page in headless Chromium against the
// server built by server.New on the embedded store: signed out (Sign in)
// and signed in (the catalog, filtered and empty, a connector's docs, an
// error page). Each page is checked and captured at 1280 and 360 px
// (checkPage), then the catalog is used with the keyboard alone: the
// skip link is the first stop and visibly focused, and the search is
// reachable and submits.
func TestBrowser(t *testing.T) {
	s := startConsole(t)
	ctx, dir, csp := startBrowser(t)

	checkPage(t, ctx, s.URL, dir, csp, pageCheck{"signin", "/console/catalog", "Sign in"})

	// The owner signs in as a person does: a one-time sign-in link, its
	// confirmation form, then the console.
	signInBrowser(t, ctx, s.loginLink(t))
	for _, p := range []pageCheck{
		{"catalog", "/console/catalog", "Catalog"},
		{"catalog-tag", "/console/catalog?tag=chat", "Catalog"},
		{"catalog-empty", "/console/catalog?type=mcp_remote", "Catalog"},
		{"connector", "/console/catalog/github", "GitHub"},
		{"not-found", "/console/catalog/nothing", "404"},
		{"instances-empty", "/console/instances", "Instances"},
		{"install", "/console/catalog/github/install", "Install GitHub"},
	} {
		checkPage(t, ctx, s.URL, dir, csp, p)
	}

	// Install github with the form, as a person would; the secret typed
	// into it never appears in a later page.
	const secret = "ghp_typed_into_the_browser_42"
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(s.URL+"/console/catalog/github/install"),
		chromedp.WaitVisible(chromedp.CSS("#field-GITHUB_TOKEN")),
		sendKeys("#field-GITHUB_TOKEN", secret),
		setValue("#field-GITHUB_API_URL", "http://127.0.0.1:1/api"),
		sendKeys("#agents", "claude"),
		click(`form.form button[type="submit"]`),
		chromedp.WaitVisible(chromedp.CSS(".endpoint"))); err != nil {
		t.Fatalf("installing through the form: %v", err)
	}
	for _, p := range []pageCheck{
		{"instance", "/console/instances/github", "github"},
		{"instances", "/console/instances", "Instances"},
		{"configure", "/console/catalog/github/install?instance=github", "Configure github"},
	} {
		checkPage(t, ctx, s.URL, dir, csp, p)
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil || strings.Contains(html, secret) || !strings.Contains(html, "github") {
			t.Errorf("%s: the typed secret is in the page, or the page is wrong (%v)", p.name, err)
		}
	}

	// copy.js ran under the CSP: it shows the copy button it enhances.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/console/instances/github"),
		chromedp.WaitVisible(chromedp.CSS(`button.copy[data-copy="mcp-url"]`))); err != nil {
		t.Errorf("the MCP endpoint's copy button is not shown: %v", err)
	}

	t.Run("keyboard", func(t *testing.T) {
		focused := func() string {
			t.Helper()
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.activeElement;
				return e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : '') })()`))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(360, 900), chromedp.Navigate(s.URL+"/console/catalog"),
			chromedp.WaitVisible(chromedp.CSS("main h1")), chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		if f := focused(); f != "a.skip" {
			t.Fatalf("first Tab stop %s, want the skip link", f)
		}
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.activeElement, r = e.getBoundingClientRect(), s = getComputedStyle(e);
			return r.left >= 0 && r.top >= 0 && r.width > 0 && s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2 })()`))
		if err != nil || !shown {
			t.Errorf("the focused skip link is not visible with a focus outline (%v)", err)
		}
		shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "catalog-focus-360.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.KeyEvent("\r"), chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		if f := focused(); f != "input#q" {
			t.Fatalf("after the skip link, Tab reached %s, want the search field", f)
		}
		ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx2, chromedp.KeyEvent("slack\r"), chromedp.WaitVisible(chromedp.CSS(`a[href="/console/catalog/slack"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(`a[href="/console/catalog/github"]`))); err != nil {
			t.Fatalf("searching with the keyboard: %v", err)
		}
		if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.HasSuffix(loc, "/console/catalog?q=slack&tag=&type=") {
			t.Errorf("the search went to %s", loc)
		}
	})

	t.Run("sign out", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/console/instances"), chromedp.WaitVisible(chromedp.CSS("main h1")),
			click(`.who button[type="submit"]`), chromedp.WaitNotPresent(chromedp.CSS(".who")),
			chromedp.Navigate(s.URL+"/console/instances"), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
			t.Fatal(err)
		}
		if h1, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main h1"))); err != nil || h1 != "Sign in" {
			t.Fatalf("after signing out the console shows %q (%v), want Sign in", h1, err)
		}
	})
}
