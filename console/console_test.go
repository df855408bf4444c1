package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

// consoleServer is a server built by server.New on the embedded store,
// with a tenant whose owner has a session.
type consoleServer struct {
	*servertest.Server
	// Session is the owner's session token (the session cookie's value).
	Session string
}

// startConsole starts the server and signs in the owner of tenant acme.
func startConsole(t testing.TB) *consoleServer {
	t.Helper()
	return startConsoleWith(t, server.Config{DB: dbtest.SQLite(t)})
}

// startConsoleWith is startConsole with the server built from cfg.
func startConsoleWith(t testing.TB, cfg server.Config) *consoleServer {
	t.Helper()
	srv := servertest.Start(t, cfg)
	ctx := context.Background()
	tenant, err := srv.Tenants().CreateTenant(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := srv.Members().AddMember(ctx, members.ActorOperator, tenant.ID, "owner@acme.test", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := srv.Members().CreateSession(ctx, tenant.ID, owner.UserID)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleServer{Server: srv, Session: token.Reveal()}
}

// loginLink returns a one-time sign-in link of the owner.
func (s *consoleServer) loginLink(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	tenant, err := s.Tenants().Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := s.Members().LoginLink(ctx, members.ActorOperator, tenant.ID, "owner@acme.test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return signin.LinkURL(s.URL, token.Reveal())
}

// page is one response of the console.
type page struct {
	status int
	header http.Header
	body   string
}

// get fetches path with the session cookie (when session is not empty).
func (s *consoleServer) get(t testing.TB, path, session string) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.do(t, req, session)
}

// post submits a form to path with the session cookie.
func (s *consoleServer) post(t testing.TB, path, session string, form url.Values) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return s.do(t, req, session)
}

// do sends req with the session cookie (when session is not empty),
// without following redirects.
func (s *consoleServer) do(t testing.TB, req *http.Request, session string) page {
	t.Helper()
	if session != "" {
		req.AddCookie(&http.Cookie{Name: s.SignIn().SessionCookie(), Value: session})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// inlineCode finds inline script or style in a page: a <script> without
// src, a <style> element, a style= or on*= attribute, a javascript: URL.
var inlineCode = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<script>|<style|\sstyle=|\son[a-z]+=|javascript:`)

// TestSecurityHeaders checks every kind of console response (pages
// signed in and out, errors, the stylesheet, icons) for the security
// headers, and every HTML page for inline script or style, which the CSP
// would block.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	for _, tc := range []struct {
		path, session string
		status        int
		html          bool
	}{
		{"/console/signin", "", 200, true},
		{"/console/catalog", "", 401, true},
		{"/console/catalog", s.Session, 200, true},
		{"/console/catalog?q=%3Cscript%3Ealert(1)%3C/script%3E", s.Session, 200, true},
		{"/console/catalog/github", s.Session, 200, true},
		{"/console/catalog/nothing", s.Session, 404, true},
		{"/console/nothing", s.Session, 404, true},
		{"/console/catalog/github/icon/small", s.Session, 200, false},
		{"/console/static/console.css", "", 200, false},
		{"/console/", s.Session, 302, false},
		{"/console", "", 302, false},
	} {
		p := s.get(t, tc.path, tc.session)
		if p.status != tc.status {
			t.Errorf("GET %s: status %d, want %d\n%s", tc.path, p.status, tc.status, p.body)
		}
		csp := p.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-eval") ||
			(tc.html && (!strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline"))) {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
		for name, want := range map[string]string{"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"} {
			if got := p.header.Get(name); got != want {
				t.Errorf("GET %s: %s %q, want %q", tc.path, name, got, want)
			}
		}
		if !tc.html {
			continue
		}
		if ct := p.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", tc.path, ct)
		}
		if p.header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", tc.path, p.header.Get("Cache-Control"))
		}
		if m := inlineCode.FindString(p.body); m != "" {
			t.Errorf("GET %s: inline code %q in the page", tc.path, m)
		}
	}
}

// TestSignIn checks the one access check: no session and a session that
// is not valid get the Sign in page (401, with the typed error's message
// and hint for the latter), never the catalog; a signed-out session is
// refused at once.
func TestSignIn(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	for _, tc := range []struct {
		name, session string
		want          []string
	}{
		{"none", "", []string{"You are not signed in", `href="/console/catalog"`}},
		{"unknown", "sbs_unknown", []string{"You are not signed in", "invalid_session", "Sign in again with a new sign-in link."}},
	} {
		p := s.get(t, "/console/catalog", tc.session)
		if p.status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", tc.name, p.status)
		}
		for _, w := range tc.want {
			if !strings.Contains(p.body, w) {
				t.Errorf("%s: the page lacks %q", tc.name, w)
			}
		}
		if strings.Contains(p.body, "GitHub") {
			t.Errorf("%s: the catalog is shown without a session", tc.name)
		}
	}
	if p := s.get(t, "/console/catalog", s.Session); p.status != 200 || !strings.Contains(p.body, "owner@acme.test") {
		t.Fatalf("signed in: status %d, page without the viewer's email", p.status)
	}
	if err := s.Members().SignOut(context.Background(), s.Session); err != nil {
		t.Fatal(err)
	}
	if p := s.get(t, "/console/catalog", s.Session); p.status != http.StatusUnauthorized || strings.Contains(p.body, "GitHub") {
		t.Fatalf("signed out: status %d, want 401 without the catalog", p.status)
	}
}

// TestCatalogFilters checks search, tag and type filters and the empty
// states.
func TestCatalogFilters(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	cards := regexp.MustCompile(`<h2><a href="/console/catalog/([a-z0-9-]+)">`)
	for _, tc := range []struct {
		query string
		want  []string
		text  string
	}{
		{"", []string{"clock", "github", "ntfy", "slack", "webdav"}, "5 of 5 connectors"},
		{"q=pull+requests", []string{"github"}, "1 of 5 connectors"},
		{"q=GITHUB+issues", []string{"github"}, ""},
		{"tag=chat", []string{"slack"}, `<option value="chat" selected>`},
		{"type=openapi", []string{"github", "slack", "webdav"}, `<option value="openapi" selected>REST API</option>`},
		{"type=mcp_remote", nil, "No connector matches"},
		{"type=mcp_local", []string{"clock", "ntfy"}, ""},
		{"q=" + url.QueryEscape(`"><script>x</script>`), nil, "&#34;&gt;&lt;script&gt;x&lt;/script&gt;"},
	} {
		p := s.get(t, "/console/catalog?"+tc.query, s.Session)
		var got []string
		for _, m := range cards.FindAllStringSubmatch(p.body, -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("?%s: connectors %v, want %v", tc.query, got, tc.want)
		}
		if !strings.Contains(p.body, tc.text) {
			t.Errorf("?%s: the page lacks %q", tc.query, tc.text)
		}
		if (tc.query != "") != strings.Contains(p.body, "Clear filters") {
			t.Errorf("?%s: Clear filters shown wrongly", tc.query)
		}
	}
}

// TestConnectorPage checks a connector's docs page (auth modes, fields
// with required and secret marks, tools, the rendered guide) and the
// typed error of an unknown connector.
func TestConnectorPage(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	p := s.get(t, "/console/catalog/github", s.Session)
	for _, w := range []string{
		"<h1 lang=\"en\">GitHub</h1>", "API key", "<code>apiKey</code>", "Access token",
		"GitHub token <code>GITHUB_TOKEN</code> <span class=\"badge\">required</span> <span class=\"badge secret\">secret</span>",
		"Default: <code>https://api.github.com</code>", "Tools agents get", "<code>issues</code>",
		`src="/console/catalog/github/icon/large"`, `href="https://docs.github.com/en/rest"`,
	} {
		if !strings.Contains(p.body, w) {
			t.Errorf("github page lacks %q", w)
		}
	}
	if !regexp.MustCompile(`<div class="markdown"><h3[ >]GitHub</h3>`).MatchString(p.body) || !strings.Contains(p.body, "<table>") {
		t.Errorf("the guide is not rendered from Markdown (headings under the section's, tables)")
	}
	icon := s.get(t, "/console/catalog/github/icon/small", s.Session)
	if icon.header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(icon.header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("icon: Content-Type %q, CSP %q", icon.header.Get("Content-Type"), icon.header.Get("Content-Security-Policy"))
	}
	nf := s.get(t, "/console/catalog/nothing", s.Session)
	for _, w := range []string{`the catalog has no connector &#34;nothing&#34;`, "<code>connector_not_found</code>", "Check the address"} {
		if nf.status != 404 || !strings.Contains(nf.body, w) {
			t.Errorf("unknown connector: status %d, page lacks %q", nf.status, w)
		}
	}
	if p := s.get(t, "/console/catalog/github", ""); p.status != 401 || strings.Contains(p.body, "GITHUB_TOKEN") {
		t.Errorf("connector page without a session: status %d", p.status)
	}
}

// TestVendoredAxe checks the vendored axe-core against the sha256
// recorded in testdata/axe/VERSION, so that a changed file is a changed
// record.
func TestVendoredAxe(t *testing.T) {
	t.Parallel()
	version, err := os.ReadFile("testdata/axe/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(axeSource))
	if want := "sha256 " + hex.EncodeToString(sum[:]) + "  axe.min.js"; !strings.Contains(string(version), want) {
		t.Fatalf("testdata/axe/axe.min.js does not match VERSION (%s)", want)
	}
	for _, f := range []string{"LICENSE", "LICENSE-3RD-PARTY.txt"} {
		if _, err := os.Stat("testdata/axe/" + f); err != nil {
			t.Errorf("axe-core's %s: %v", f, err)
		}
	}
}

// memberSession signs in a member (role member) of acme.
func (s *consoleServer) memberSession(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	tenant, err := s.Tenants().Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Members().AddMember(ctx, members.ActorOperator, tenant.ID, "member@acme.test", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := s.Members().CreateSession(ctx, tenant.ID, m.UserID)
	if err != nil {
		t.Fatal(err)
	}
	return token.Reveal()
}

// TestInstall installs the github connector through the console's form:
// the form is generated from the connector's fields with the session's
// CSRF token; a form without it, a member, and an invalid value change
// nothing; a saved secret shows as set and its value never appears in
// any later page; members see no configuration.
func TestInstall(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	ctx := context.Background()
	const secret = "ghp_console_secret_value_123"
	csrf := members.CSRFToken(s.Session)

	if p := s.get(t, "/console/instances", s.Session); p.status != 200 || !strings.Contains(p.body, "No instance yet") ||
		!strings.Contains(p.body, `<a href="/console/catalog">catalog</a>`) {
		t.Fatalf("empty instance list: status %d\n%s", p.status, p.body)
	}
	form := s.get(t, "/console/catalog/github/install", s.Session)
	for _, w := range []string{
		`<input type="hidden" name="csrf_token" value="` + csrf + `">`,
		`<input id="field-GITHUB_TOKEN" name="field_GITHUB_TOKEN" type="password" autocomplete="off" aria-describedby="help-GITHUB_TOKEN" required>`,
		`name="field_GITHUB_API_URL" value="https://api.github.com"`, `placeholder="https://github.example.com/api/v3"`,
		`id="mode-apiKey" name="auth_mode" value="apiKey" checked`, `<label for="agents">`,
	} {
		if !strings.Contains(form.body, w) {
			t.Errorf("install form lacks %s", w)
		}
	}

	values := func(slug, token string) url.Values {
		return url.Values{"slug": {slug}, "auth_mode": {"apiKey"}, "field_GITHUB_TOKEN": {token},
			"field_GITHUB_API_URL": {"http://127.0.0.1:1/api"}, "agents": {"claude\nci-bot"}}
	}
	noToken := values("github", secret)
	wrongToken := values("github", secret)
	wrongToken.Set("csrf_token", members.CSRFToken("sbs_other"))
	member := s.memberSession(t)
	memberForm := values("github", secret)
	memberForm.Set("csrf_token", members.CSRFToken(member))
	badSlug := values("Not A Slug", secret)
	badSlug.Set("csrf_token", csrf)
	for _, tc := range []struct {
		name, session string
		form          url.Values
		status        int
		want          string
	}{
		{"no csrf token", s.Session, noToken, 403, "csrf_failed"},
		{"another session's token", s.Session, wrongToken, 403, "csrf_failed"},
		{"member", member, memberForm, 403, "role_required"},
		{"invalid slug", s.Session, badSlug, 400, "invalid_slug"},
	} {
		p := s.post(t, "/console/catalog/github/install", tc.session, tc.form)
		if p.status != tc.status || !strings.Contains(p.body, tc.want) {
			t.Errorf("%s: status %d, want %d with %q\n%s", tc.name, p.status, tc.status, tc.want, p.body)
		}
		if strings.Contains(p.body, secret) {
			t.Errorf("%s: the secret is rendered back", tc.name)
		}
		if list, err := s.Tenants().ListInstances(ctx, "acme"); err != nil || len(list) != 0 {
			t.Fatalf("%s: instances %d (%v), want none", tc.name, len(list), err)
		}
	}

	ok := values("github", secret)
	ok.Set("csrf_token", csrf)
	p := s.post(t, "/console/catalog/github/install", s.Session, ok)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/instances/github?done=saved" {
		t.Fatalf("install: status %d, Location %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	in, err := s.Tenants().Instance(ctx, "acme", "github")
	if err != nil || strings.Join(in.Agents, ",") != "ci-bot,claude" {
		t.Fatalf("installed instance: agents %q, %v", in.Agents, err)
	}
	// Saving again with the secret left empty keeps it.
	keep := values("github", "")
	keep.Set("csrf_token", csrf)
	keep.Set("agents", "claude")
	if p := s.post(t, "/console/catalog/github/install", s.Session, keep); p.status != http.StatusSeeOther {
		t.Fatalf("save without the secret: status %d\n%s", p.status, p.body)
	}
	in, err = s.Tenants().Instance(ctx, "acme", "github")
	if err != nil {
		t.Fatal(err)
	}
	stored, _, err := s.Tenants().Store().FieldValues(ctx, in.Instance)
	if err != nil || stored["GITHUB_TOKEN"].Reveal() != secret || strings.Join(in.Agents, ",") != "claude" {
		t.Fatalf("saving with the secret left empty: secret kept %v, agents %q (%v)", stored["GITHUB_TOKEN"].Reveal() == secret, in.Agents, err)
	}

	pages := map[string]page{
		"instance":  s.get(t, "/console/instances/github", s.Session),
		"list":      s.get(t, "/console/instances", s.Session),
		"configure": s.get(t, "/console/catalog/github/install?instance=github", s.Session),
		"member":    s.get(t, "/console/instances/github", member),
	}
	for name, p := range pages {
		if p.status != 200 || strings.Contains(p.body, secret) {
			t.Errorf("%s page: status %d, or the secret is in the page", name, p.status)
		}
	}
	for _, w := range []string{"<dt><code>GITHUB_TOKEN</code></dt>\n    <dd>set</dd>", s.URL + "/workspaces/acme/webhooks/github.mcp", "<code>claude</code>"} {
		if !strings.Contains(pages["instance"].body, w) {
			t.Errorf("instance page lacks %q", w)
		}
	}
	if !strings.Contains(pages["configure"].body, "A value is set. Leave empty to keep it") || strings.Contains(pages["configure"].body, "GITHUB_TOKEN\" type=\"password\" autocomplete=\"off\" aria-describedby=\"help-GITHUB_TOKEN\" required") {
		t.Errorf("configure form: the set secret is not shown as set (or still required)")
	}
	if m := pages["member"]; strings.Contains(m.body, "GITHUB_API_URL") || strings.Contains(m.body, "Configure") || !strings.Contains(m.body, "github.mcp") {
		t.Errorf("member's instance page shows the configuration, or not the endpoint")
	}
	if p := s.get(t, "/console/catalog/github/install", member); p.status != 403 || !strings.Contains(p.body, "role_required") {
		t.Errorf("member opening the install form: status %d", p.status)
	}
}

// TestSignInLink signs in with a one-time link through the sign-in
// handler and opens the console with the cookie it sets: the console
// admits exactly the sessions the sign-in handler issues, and after
// Sign out (the console's button posts there) shows Sign in again.
func TestSignInLink(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	u, err := url.Parse(s.loginLink(t))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.URL+signin.LinkPath, strings.NewReader(url.Values{"token": {u.Query().Get("token")}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.URL)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session string
	for _, c := range resp.Cookies() {
		if c.Name == s.SignIn().SessionCookie() {
			session = c.Value
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == "" {
		t.Fatalf("redeeming the link: status %d, session cookie set %v", resp.StatusCode, session != "")
	}
	p := s.get(t, "/console/instances", session)
	signOut := `<form method="post" action="/signin/sign-out"><input type="hidden" name="csrf_token" value="` + members.CSRFToken(session) + `">`
	if p.status != 200 || !strings.Contains(p.body, "owner@acme.test") || !strings.Contains(p.body, signOut) {
		t.Fatalf("console after signing in: status %d, no viewer or Sign out form\n%s", p.status, p.body)
	}
	if out := s.post(t, signin.SignOutPath, session, url.Values{"csrf_token": {members.CSRFToken(session)}}); out.status != http.StatusSeeOther {
		t.Fatalf("sign out: status %d", out.status)
	}
	if p := s.get(t, "/console/instances", session); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "Sign in") {
		t.Fatalf("console after signing out: status %d", p.status)
	}
}
