package main

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
)

// linkLine is the first start's operator sign-in link as serve prints it.
var linkLine = regexp.MustCompile(`(?m)^\s+(http://\S+` + regexp.QuoteMeta(signin.LinkPath) + `\?token=` + members.OperatorLinkTokenPrefix + `\S+)$`)

var (
	csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	openLink  = regexp.MustCompile(`<a class="button" id="once-open" href="([^"]+)">`)
)

// serveProcess is a `switchboard serve` process: its JSON log (stdout)
// and what it printed on the terminal (stderr).
type serveProcess struct {
	url           string
	log, terminal *logtest.Buffer
	cmd           *exec.Cmd
}

// startServe runs the built binary's serve on a free loopback port over
// the data directory data and waits until it is ready.
func startServe(t *testing.T, bin, data string, env ...string) *serveProcess {
	t.Helper()
	addr := freeAddr(t)
	p := &serveProcess{url: "http://" + addr, log: &logtest.Buffer{}, terminal: &logtest.Buffer{}}
	p.cmd = exec.Command(bin, "serve", "--addr", addr, "--data-dir", data)
	p.cmd.Env = append(append(os.Environ(), "SWITCHBOARD_ADMIN_TOKEN=", "SWITCHBOARD_DATABASE_URL="), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.terminal
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get(p.url + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
	}
	t.Fatalf("serve is not ready:\n%s\n%s", p.terminal.String(), p.log.String())
	return nil
}

// printedLink returns the first start's sign-in link the process
// printed, or "" when it printed none.
func (p *serveProcess) printedLink() string {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := linkLine.FindStringSubmatch(p.terminal.String()); m != nil {
			return m[1]
		}
	}
	return ""
}

func (p *serveProcess) stop() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(os.Interrupt)
		p.cmd.Wait()
	}
}

// browserSession is a person's browser: a cookie jar, and the pages it
// was shown.
type browserSession struct {
	t      *testing.T
	base   string
	client *http.Client
}

func newBrowserSession(t *testing.T, base string) *browserSession {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browserSession{t: t, base: base, client: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
}

// do sends a request as a browser of the server's origin does and
// returns the final page (redirects followed) and its status.
func (b *browserSession) do(method, target string, form url.Values) (int, string) {
	b.t.Helper()
	if !strings.HasPrefix(target, "http") {
		target = b.base + target
	}
	req, err := http.NewRequest(method, target, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

// submit posts a console form: the fields kv and the CSRF token of the
// page the form is on.
func (b *browserSession) submit(page, action string, kv ...string) (int, string) {
	b.t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no CSRF token on the page of %s:\n%s", action, page)
	}
	f := url.Values{"csrf_token": {m[1]}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return b.do(http.MethodPost, action, f)
}

// signIn opens a one-time link and presses its Sign in button.
func (b *browserSession) signIn(link string) (int, string) {
	b.t.Helper()
	status, form := b.do(http.MethodGet, link, nil)
	if status != http.StatusOK || !strings.Contains(form, `action="`+signin.LinkPath+`"`) {
		b.t.Fatalf("the link %s shows %d:\n%s", link, status, form)
	}
	// The form carries the link's token and next page.
	u, _ := url.Parse(link)
	f := url.Values{"token": {u.Query().Get("token")}}
	if next := u.Query().Get(signin.NextParam); next != "" {
		f.Set(signin.NextParam, next)
	}
	return b.do(http.MethodPost, signin.LinkPath, f)
}

// becomeOwner is the quickstart's steps 1 and 2: the browser opens the
// first start's link (the operator's tenants page), creates tenant, invites
// email as its owner and opens the invitation here (the owner's console).
func (b *browserSession) becomeOwner(link, tenant, email string) {
	t := b.t
	t.Helper()
	if _, form := b.do(http.MethodGet, link, nil); strings.Contains(form, "ends that session") {
		t.Errorf("a browser without a session is told signing in ends one")
	}
	status, page := b.signIn(link)
	if status != http.StatusOK || !strings.Contains(page, "<h1>Tenants</h1>") || !strings.Contains(page, "No tenant yet") {
		t.Fatalf("after the first start's link: %d\n%s", status, page)
	}
	status, page = b.submit(page, "/console/operator/tenants", "slug", tenant, "name", strings.ToUpper(tenant[:1])+tenant[1:])
	if status != http.StatusOK || !strings.Contains(page, `list="tenant-slugs" value="`+tenant+`"`) {
		t.Fatalf("creating a tenant: %d\n%s", status, page)
	}
	status, page = b.submit(page, "/console/operator/tenants/invite", "tenant", tenant, "email", email)
	m := openLink.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		t.Fatalf("inviting the owner: %d, no link that opens the invitation here\n%s", status, page)
	}
	// Its confirmation says the operator's session ends.
	if _, form := b.do(http.MethodGet, html.UnescapeString(m[1]), nil); !strings.Contains(form, "signing in with the link ends that session") {
		t.Errorf("the invitation's confirmation in the operator's browser does not say their session ends:\n%s", form)
	}
	status, page = b.signIn(html.UnescapeString(m[1]))
	if status != http.StatusOK || !strings.Contains(page, email) {
		t.Fatalf("opening the invitation in the operator's browser: %d\n%s", status, page)
	}
}

// TestFirstStartSignInLink runs the built binary's `switchboard serve` on
// an empty data directory, as the README's quickstart does: it prints the
// operator token and a one-time operator sign-in link (never into the
// JSON log). The link signs a browser in as the operator (the tenants
// page); there they create a tenant, invite themself as its owner and
// open the invitation in the same browser (the "Open it in this browser"
// link), which ends the operator session and leaves the browser the
// owner's. The link works once. A restart of the set-up store prints no
// new link nor token.
func TestFirstStartSignInLink(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts a server process")
	}
	bin, data := switchboardBinary(t), t.TempDir()
	srv := startServe(t, bin, data)
	link := srv.printedLink()
	terminal := srv.terminal.String()
	t.Logf("first start printed:\n%s", terminal)
	if link == "" || !strings.HasPrefix(link, srv.url+signin.LinkPath) || tokenLine.FindStringSubmatch(terminal) == nil {
		t.Fatalf("the first start printed no sign-in link on %s, or no operator token:\n%s", srv.url, terminal)
	}
	if !strings.Contains(terminal, "works once, until "+time.Now().UTC().Add(members.FirstStartLinkLifetime).Format("2006-01-02")) &&
		!strings.Contains(terminal, "works once, until "+time.Now().UTC().Add(members.FirstStartLinkLifetime+time.Minute).Format("2006-01-02")) {
		t.Errorf("the link's lifetime is not the first start's 24 hours:\n%s", terminal)
	}
	token := strings.TrimPrefix(link[strings.Index(link, "token="):], "token=")
	if strings.Contains(srv.log.String(), token) || !strings.Contains(srv.log.String(), members.FirstStartLinkID) {
		t.Fatalf("the link's token is in the JSON log, or the log does not say a link was minted:\n%s", srv.log.String())
	}

	b := newBrowserSession(t, srv.url)
	b.becomeOwner(link, "acme", "olga@acme.test")
	// The browser is now the owner's: the tenant's pages open, the
	// operator's do not (that session ended when the owner signed in).
	if status, page := b.do(http.MethodGet, "/console/instances", nil); status != http.StatusOK || !strings.Contains(page, "<h1>Instances</h1>") ||
		!strings.Contains(page, "olga@acme.test") {
		t.Errorf("the owner's instances page: %d\n%s", status, page)
	}
	if status, page := b.do(http.MethodGet, "/console/operator/tenants", nil); status != http.StatusForbidden || !strings.Contains(page, "Access restricted") {
		t.Errorf("the owner opened the operator's tenants page: %d", status)
	}
	// The first start's link was spent.
	if status, page := newBrowserSession(t, srv.url).signIn(link); status == http.StatusOK || !strings.Contains(page, "invalid_link") {
		t.Errorf("the first start's link worked twice: %d\n%s", status, page)
	}

	// A restart of the set-up store prints neither a link nor a token.
	srv.stop()
	again := startServe(t, bin, data)
	time.Sleep(200 * time.Millisecond) // the token and link are printed before /readyz answers; give the pipe a moment
	if out := again.terminal.String(); strings.Contains(out, members.OperatorLinkTokenPrefix) || strings.Contains(out, auth.OperatorTokenPrefix) {
		t.Fatalf("a restart printed a sign-in link or an operator token:\n%s", out)
	}
}
