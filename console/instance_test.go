package console_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/connectflow"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/tenants"
)

// notesCatalog is a connector whose users connect their own accounts
// (oauthCentral through the platform's provider notesidp, or oauth with
// the tenant's own client) or that an API key reaches, with a probe.
var notesCatalog = map[string]string{
	"notes/connector.json": `{
  "id": "notes", "name": "Notes", "version": "1.0.0", "type": "openapi", "scope": "global",
  "auth": {"type": "oauth2", "modes": ["apiKey", "oauth", "oauthCentral"], "provider": "notesidp", "scopes": ["notes.read"],
           "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [
    {"name": "API_URL", "label": "API URL", "required": true},
    {"name": "API_KEY", "label": "API key", "secret": true},
    {"name": "CLIENT_ID", "label": "Client id"},
    {"name": "CLIENT_SECRET", "label": "Client secret", "secret": true},
    {"name": "AUTHORIZE_URL", "label": "Authorize URL"},
    {"name": "TOKEN_URL", "label": "Token URL"}
  ],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}",
  "verify": {"probe": {"operation": "getMe"}}
}`,
	"notes/openapi.json": `{
  "openapi": "3.0.3", "info": {"title": "Notes", "version": "1"},
  "paths": {"/me": {"get": {"operationId": "getMe", "x-entity": "me", "x-action": "get", "summary": "Whose notes",
     "responses": {"200": {"description": "ok"}}}}}
}`,
}

// goodKey is the API key the notes upstream accepts.
const goodKey = "notes_key_console_canary_7f3a"

// notesUpstream is the vendor API: GET /me answers for the API key
// goodKey or a bearer token the authorization server validates.
func notesUpstream(t testing.TB, as *authztest.Server) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := ""
		if r.Header.Get("X-Api-Key") == goodKey {
			who = "key"
		} else if as != nil {
			who, _ = as.Validate(r)
		}
		if who == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"user": %q}`, who)
	}))
	t.Cleanup(up.Close)
	return up
}

// startNotes starts the console with the notes catalog.
func startNotes(t testing.TB) *consoleServer {
	t.Helper()
	return startConsoleWith(t, server.Config{DB: dbtest.SQLite(t), ConnectorCatalog: registrytest.Load(t, notesCatalog)})
}

// installKey installs notes-key (mode apiKey) against up through the
// tenant service.
func installKey(t testing.TB, s *consoleServer, upURL string, agents ...string) {
	t.Helper()
	api, key := secrets.New(upURL), secrets.New(goodKey)
	if _, _, err := s.Tenants().Install(context.Background(), "acme", "notes-key", tenants.InstallRequest{ConnectorID: "notes", AuthMode: "apiKey",
		Fields: map[string]*secrets.Secret{"API_URL": &api, "API_KEY": &key}, Agents: append([]string{}, agents...)}); err != nil {
		t.Fatal(err)
	}
}

func agentsOf(t testing.TB, s *consoleServer, slug string) string {
	t.Helper()
	in, err := s.Tenants().Instance(context.Background(), "acme", slug)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(in.Agents, ",")
}

// TestInstallAuthModes checks the install form's auth-mode picker and
// verify-before-save: oauthCentral comes first, preselected only once the
// operator registered its provider with a client; mode oauth shows the
// exact callback URL with a copy button; a failed verification shows its
// typed error and JSON and saves nothing; a passed one lands on the
// instance page with the verification's JSON.
func TestInstallAuthModes(t *testing.T) {
	t.Parallel()
	s := startNotes(t)
	ctx := context.Background()
	up := notesUpstream(t, nil)
	radios := regexp.MustCompile(`<input type="radio" id="mode-([a-zA-Z]+)"([^>]*)>`)
	modes := func(body string) (order []string, checked string) {
		for _, m := range radios.FindAllStringSubmatch(body, -1) {
			order = append(order, m[1])
			if strings.Contains(m[2], " checked") {
				checked = m[1]
			}
		}
		return order, checked
	}

	p := s.get(t, "/console/catalog/notes/install", s.Session)
	order, checked := modes(p.body)
	if strings.Join(order, ",") != "oauthCentral,apiKey,oauth" || checked != "apiKey" {
		t.Errorf("without the provider: modes %v, checked %q; want oauthCentral first, apiKey checked", order, checked)
	}
	callback := s.URL + "/workspaces/acme/webhooks/notes/oauth/callback"
	for _, w := range []string{"has not registered the provider notesidp", `<code class="endpoint" id="callback-url">` + callback + `</code>`,
		`<button type="button" class="copy" data-copy="callback-url" hidden>Copy</button>`} {
		if !strings.Contains(p.body, w) {
			t.Errorf("install form lacks %q", w)
		}
	}

	id := secrets.New("platform-notes-client")
	if _, _, err := s.Providers().Put(ctx, "notesidp", auth.ProviderRequest{Name: "Notes", AuthorizeURL: "http://127.0.0.1:1/authorize",
		TokenURL: "http://127.0.0.1:1/token", ClientID: &id}); err != nil {
		t.Fatal(err)
	}
	p = s.get(t, "/console/catalog/notes/install", s.Session)
	if order, checked := modes(p.body); order[0] != "oauthCentral" || checked != "oauthCentral" || strings.Contains(p.body, "has not registered") {
		t.Errorf("with the provider: modes %v, checked %q; want oauthCentral first and checked", order, checked)
	}

	bad := form(s.Session, "slug", "notes-key", "auth_mode", "apiKey", "field_API_URL", up.URL, "field_API_KEY", "wrong_key_canary_91", "agents", "bot")
	p = s.post(t, "/console/catalog/notes/install", s.Session, bad)
	for _, w := range []string{"verification failed, nothing was saved", "Nothing was saved.", `<pre class="result" id="result-json"`,
		`&#34;code&#34;: &#34;verification_failed&#34;`, "Correct the value named above"} {
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, w) {
			t.Errorf("failed verification: status %d, page lacks %q", p.status, w)
		}
	}
	if strings.Contains(p.body, "wrong_key_canary_91") {
		t.Error("the typed secret is rendered back")
	}
	if _, err := s.Tenants().Instance(ctx, "acme", "notes-key"); err == nil {
		t.Fatal("a failed verification saved the instance")
	}

	good := form(s.Session, "slug", "notes-key", "auth_mode", "apiKey", "field_API_URL", up.URL, "field_API_KEY", goodKey, "agents", "bot")
	p = s.post(t, "/console/catalog/notes/install", s.Session, good)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/instances/notes-key?done=saved" {
		t.Fatalf("install: status %d, Location %q", p.status, p.header.Get("Location"))
	}
	p = s.get(t, p.header.Get("Location"), s.Session)
	for _, w := range []string{"Saved. The configuration passed verification", `id="verification-json"`, `&#34;ok&#34;: true`, `&#34;ran&#34;: true`} {
		if !strings.Contains(p.body, w) {
			t.Errorf("instance page after saving lacks %q", w)
		}
	}
	if strings.Contains(p.body, goodKey) {
		t.Error("the API key is in the instance page")
	}
}

// TestInstanceAdminActions drives the instance page's admin actions:
// the allowlist editor, Test connection and Delete. A member, a form
// without the CSRF token and bad input are refused with their typed
// error and change nothing.
func TestInstanceAdminActions(t *testing.T) {
	t.Parallel()
	s := startNotes(t)
	ctx := context.Background()
	up := notesUpstream(t, nil)
	installKey(t, s, up.URL, "bot")
	member := s.memberSession(t)
	const page = "/console/instances/notes-key"

	p := s.get(t, page, s.Session)
	for _, html := range []string{p.body, s.get(t, page+"/delete", s.Session).body, s.get(t, "/console/catalog/notes/install", s.Session).body} {
		if m := inlineCode.FindString(html); m != "" {
			t.Errorf("inline code %q in a page", m)
		}
	}
	for _, w := range []string{`<label for="add-agent">`, `aria-label="Remove bot"`, `action="/console/instances/notes-key/test#test-result"`,
		`href="/console/instances/notes-key/delete"`, "No call yet", `href="/console/audit?instance=notes-key&amp;kind=calls"`} {
		if !strings.Contains(p.body, w) {
			t.Errorf("admin's instance page lacks %q", w)
		}
	}
	if m := s.get(t, page, member); m.status != 200 || strings.Contains(m.body, "add-agent") || strings.Contains(m.body, "Test connection") ||
		strings.Contains(m.body, "Delete") || strings.Contains(m.body, "API_URL") || !strings.Contains(m.body, "notes-key.mcp") {
		t.Errorf("member's instance page: status %d, shows admin parts or lacks the endpoint", m.status)
	}

	// Refusals: nothing changes.
	noCSRF := form(s.Session, "add", "other")
	noCSRF.Del("csrf_token")
	for _, tc := range []struct {
		name, path, session string
		form                url.Values
		status              int
		code                string
	}{
		{"member adds", page + "/agents", member, form(member, "add", "other"), 403, "role_required"},
		{"member removes", page + "/agents", member, form(member, "remove", "bot"), 403, "role_required"},
		{"no csrf", page + "/agents", s.Session, noCSRF, 403, "csrf_failed"},
		{"another session's csrf", page + "/agents", s.Session, form(member, "add", "other"), 403, "csrf_failed"},
		{"bad agent id", page + "/agents", s.Session, form(s.Session, "add", "not an agent!"), 400, "invalid_agents"},
		{"nothing named", page + "/agents", s.Session, form(s.Session), 400, "invalid_agents"},
		{"member tests", page + "/test", member, form(member), 403, "role_required"},
		{"member deletes", page + "/delete", member, form(member), 403, "role_required"},
		{"delete without csrf", page + "/delete", s.Session, url.Values{}, 403, "csrf_failed"},
		{"unknown instance", "/console/instances/nothing/agents", s.Session, form(s.Session, "add", "x"), 404, "instance_not_found"},
	} {
		p := s.post(t, tc.path, tc.session, tc.form)
		if p.status != tc.status || !strings.Contains(p.body, "<code>"+tc.code+"</code>") {
			t.Errorf("%s: status %d, want %d with %s", tc.name, p.status, tc.status, tc.code)
		}
		if got := agentsOf(t, s, "notes-key"); got != "bot" {
			t.Fatalf("%s: the allowlist is %q, want bot", tc.name, got)
		}
	}
	if p := s.post(t, page+"/agents", s.Session, form(s.Session, "add", "not an agent!")); !strings.Contains(p.body, `value="not an agent!"`) ||
		!strings.Contains(p.body, "Nothing was changed.") {
		t.Error("a refused agent id is not shown again with the error")
	}
	if p := s.get(t, page+"/delete", member); p.status != 403 {
		t.Errorf("member opens the delete confirmation: status %d", p.status)
	}

	// The allowlist editor adds and removes.
	if p := s.post(t, page+"/agents", s.Session, form(s.Session, "add", "ci-bot")); p.status != 303 || p.header.Get("Location") != page+"?done=agents" {
		t.Fatalf("add: status %d, Location %q", p.status, p.header.Get("Location"))
	}
	if got := agentsOf(t, s, "notes-key"); got != "bot,ci-bot" {
		t.Fatalf("after adding: %q", got)
	}
	if p := s.get(t, page+"?done=agents", s.Session); !strings.Contains(p.body, "The agent allowlist is saved.") {
		t.Error("no notice after saving the allowlist")
	}
	if p := s.post(t, page+"/agents", s.Session, form(s.Session, "remove", "bot")); p.status != 303 {
		t.Fatalf("remove: status %d", p.status)
	}
	if got := agentsOf(t, s, "notes-key"); got != "ci-bot" {
		t.Fatalf("after removing: %q", got)
	}

	// The tools mode: a select of the three, saved through Patch; a bad
	// value or a member changes nothing.
	toolsMode := func() string {
		in, err := s.Tenants().Instance(ctx, "acme", "notes-key")
		if err != nil {
			t.Fatal(err)
		}
		return in.ToolsMode
	}
	if p := s.get(t, page, s.Session); !strings.Contains(p.body, `<option value="auto" selected>`) || !strings.Contains(p.body, `name="tools_mode"`) {
		t.Error("the instance page does not show the tools mode auto")
	}
	if p := s.post(t, page+"/tools-mode", s.Session, form(s.Session, "tools_mode", "everything")); p.status != 400 ||
		!strings.Contains(p.body, "<code>invalid_tools_mode</code>") || toolsMode() != tenants.ToolsAuto {
		t.Errorf("bad tools mode: status %d, stored %q", p.status, toolsMode())
	}
	if p := s.post(t, page+"/tools-mode", member, form(member, "tools_mode", "meta")); p.status != 403 || toolsMode() != tenants.ToolsAuto {
		t.Errorf("member sets the tools mode: status %d, stored %q", p.status, toolsMode())
	}
	if p := s.post(t, page+"/tools-mode", s.Session, form(s.Session, "tools_mode", "meta")); p.status != 303 || p.header.Get("Location") != page+"?done=tools-mode" {
		t.Fatalf("tools mode meta: status %d, Location %q", p.status, p.header.Get("Location"))
	}
	if p := s.get(t, page+"?done=tools-mode", s.Session); toolsMode() != tenants.ToolsMeta || !strings.Contains(p.body, `<option value="meta" selected>`) ||
		!strings.Contains(p.body, "The MCP tools mode is saved.") {
		t.Errorf("after saving meta: stored %q", toolsMode())
	}

	// Test connection runs the probe against the upstream.
	p = s.post(t, page+"/test", s.Session, form(s.Session))
	if p.status != 200 || !strings.Contains(p.body, `class="test-result pass"`) || !strings.Contains(p.body, `&#34;ok&#34;: true`) {
		t.Errorf("test connection: status %d, no passed result\n%s", p.status, p.body)
	}
	up.Close() // the upstream goes away: the test fails, and says so
	p = s.post(t, page+"/test", s.Session, form(s.Session))
	if p.status != 200 || !strings.Contains(p.body, `class="test-result fail"`) || strings.Contains(p.body, goodKey) {
		t.Errorf("test connection against a closed upstream: status %d, no failed result", p.status)
	}

	// Delete: a confirmation page, then the list.
	p = s.get(t, page+"/delete", s.Session)
	if p.status != 200 || !strings.Contains(p.body, `<form method="post" action="/console/instances/notes-key/delete"`) ||
		!strings.Contains(p.body, `name="csrf_token" value="`+members.CSRFToken(s.Session)+`"`) {
		t.Fatalf("delete confirmation: status %d", p.status)
	}
	p = s.post(t, page+"/delete", s.Session, form(s.Session))
	if p.status != 303 || p.header.Get("Location") != "/console/instances?deleted=notes-key" {
		t.Fatalf("delete: status %d, Location %q", p.status, p.header.Get("Location"))
	}
	if _, err := s.Tenants().Instance(ctx, "acme", "notes-key"); err == nil {
		t.Fatal("the instance is still there")
	}
	if p := s.get(t, p.header.Get("Location"), s.Session); !strings.Contains(p.body, "The instance notes-key is deleted.") || !strings.Contains(p.body, "No instance yet") {
		t.Error("the instance list does not say the instance was deleted")
	}
}

// browserClient is a person's browser for the OAuth flow: a cookie jar
// holding the console session, and the authorization server's stand-in
// login for login.
func browserClient(t testing.TB, s *consoleServer, session string, as *authztest.Server, login string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(s.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: s.SignIn().SessionCookie(), Value: session, Path: "/"}})
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, Transport: loginTransport{as: as.URL, login: login}}
}

type loginTransport struct{ as, login string }

func (l loginTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.String(), l.as) {
		r = r.Clone(r.Context())
		r.Header.Set(authztest.LoginHeader, l.login)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// installOAuth installs notes (mode oauth, agent bot) with the tenant's
// own client at a new authorization server (of opts), against an upstream that
// accepts its tokens, and returns the authorization server.
func installOAuth(t testing.TB, s *consoleServer, opts authztest.Options) *authztest.Server {
	t.Helper()
	as := authztest.New(t, opts)
	up := notesUpstream(t, as)
	as.AddClient(authztest.Client{ID: "tenant-notes", Secret: "tenant-notes-secret", Scopes: []string{"notes.read"},
		RedirectURIs: []string{s.URL + "/workspaces/acme/webhooks/notes/oauth/callback"}})
	fields := map[string]string{"API_URL": up.URL, "CLIENT_ID": "tenant-notes", "CLIENT_SECRET": "tenant-notes-secret",
		"AUTHORIZE_URL": as.AuthorizeURL(), "TOKEN_URL": as.TokenURL()}
	req := tenants.InstallRequest{ConnectorID: "notes", AuthMode: "oauth", Fields: map[string]*secrets.Secret{}, Agents: []string{"bot"}}
	for k, v := range fields {
		sv := secrets.New(v)
		req.Fields[k] = &sv
	}
	if _, _, err := s.Tenants().Install(context.Background(), "acme", "notes", req); err != nil {
		t.Fatal(err)
	}
	return as
}

// connectMember connects the member of session to notes from its
// instance page, through the authorization server as member@acme.test,
// and checks the callback page leads back to the instance page.
func connectMember(t testing.TB, s *consoleServer, as *authztest.Server, session string) {
	t.Helper()
	page := s.URL + "/console/instances/notes"
	b := browserClient(t, s, session, as, "member@acme.test")
	res, err := b.PostForm(page+"/connect", form(session))
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if m := inlineCode.FindString(body); m != "" {
		t.Errorf("inline code %q in the connect page", m)
	}
	m := continueLink.FindStringSubmatch(body)
	if res.StatusCode != 200 || m == nil {
		t.Fatalf("connect: status %d, no link to the provider\n%s", res.StatusCode, body)
	}
	authorize := html.UnescapeString(m[1])
	if !strings.HasPrefix(authorize, as.AuthorizeURL()+"?") || !strings.Contains(body, "Continue to "+strings.TrimPrefix(as.URL, "http://")) {
		t.Fatalf("connect: link %q", authorize)
	}
	res, err = b.Get(authorize)
	if err != nil {
		t.Fatal(err)
	}
	body = readBody(t, res)
	if res.StatusCode != 200 || !strings.Contains(body, "Connected") || !strings.Contains(body, `href="`+page+`"`) {
		t.Fatalf("callback: status %d at %s\n%s", res.StatusCode, res.Request.URL, body)
	}
}

var continueLink = regexp.MustCompile(`id="continue" href="([^"]+)"`)

// TestInstanceGrants connects a member's own account from the instance
// page through the real authorization server, and checks what each role
// sees: the member their own grant (never a token) and no configuration,
// the admin everyone's grant status; Disconnect needs the CSRF token;
// recent calls are the member's own for a member.
func TestInstanceGrants(t *testing.T) {
	t.Parallel()
	s := startNotes(t)
	ctx := context.Background()
	as := installOAuth(t, s, authztest.Options{})
	miaID, member := s.sessionAs(t, "member@acme.test", members.RoleMember)
	tenant := s.acme(t)
	const page = "/console/instances/notes"

	p := s.get(t, page, member)
	for _, w := range []string{"Your Notes account", `id="grant-state">Not connected<`, `action="/console/instances/notes/connect"`} {
		if !strings.Contains(p.body, w) {
			t.Errorf("member's page before connecting lacks %q", w)
		}
	}
	for _, w := range []string{"tenant-notes-secret", "CLIENT_ID", "Everyone", "Agents allowed"} {
		if strings.Contains(p.body, w) {
			t.Errorf("member's page shows %q", w)
		}
	}

	// Connect without the CSRF token starts nothing.
	if p := s.post(t, page+"/connect", member, url.Values{}); p.status != 403 || strings.Contains(p.body, "authorize") {
		t.Errorf("connect without csrf: status %d", p.status)
	}

	// The member connects through the authorization server.
	connectMember(t, s, as, member)

	p = s.get(t, page, member)
	for _, w := range []string{`id="grant-state">Connected<`, "<code>notes.read</code>", "Access expires", `id="disconnect"`} {
		if !strings.Contains(p.body, w) {
			t.Errorf("member's page after connecting lacks %q", w)
		}
	}
	admin := s.get(t, page, s.Session)
	rows := regexp.MustCompile(`(?s)<td>([^<]+@acme.test)</td>\s*<td><span class="grant ([a-z-]+)">`).FindAllStringSubmatch(admin.body, -1)
	got := map[string]string{}
	for _, r := range rows {
		got[r[1]] = r[2]
	}
	if got["member@acme.test"] != "connected" || got["owner@acme.test"] != "not-connected" {
		t.Errorf("admin's table of grants: %v", got)
	}

	// Recent calls: the admin sees every row of the instance, the member
	// their own.
	now := time.Now().UTC()
	if err := s.AuditStore().Insert(ctx, []audit.Entry{
		{ID: "a1", Time: now, Tenant: tenant.ID, Instance: "notes", Agent: "bot", Actor: miaID, Subject: miaID, Tool: "me", Action: "get", Outcome: "ok", Status: 200},
		{ID: "a2", Time: now, Tenant: tenant.ID, Instance: "notes", Agent: "bot", Actor: "someone-else", Subject: "someone-else", Tool: "me", Action: "get", Outcome: "upstream_error", Status: 500},
	}); err != nil {
		t.Fatal(err)
	}
	callsFor := func(body string) []string {
		var who []string
		for _, m := range regexp.MustCompile(`<td><code>me</code> get</td>\s*<td>([^<]+)</td>`).FindAllStringSubmatch(body, -1) {
			who = append(who, m[1])
		}
		slices.Sort(who)
		return who
	}
	// Members are named by email, other users by their id.
	if got := callsFor(s.get(t, page, s.Session).body); strings.Join(got, ",") != "member@acme.test,someone-else" {
		t.Errorf("the admin's recent calls are for %v, want every call", got)
	}
	p = s.get(t, page, member)
	if got := callsFor(p.body); strings.Join(got, ",") != "member@acme.test" || !strings.Contains(p.body, `href="/console/audit?instance=notes&amp;kind=calls"`) {
		t.Errorf("the member's recent calls are for %v (want their own only), or lack the audit link", got)
	}

	// No page holds a token the authorization server issued.
	issued := as.Issued()
	if len(issued) == 0 {
		t.Fatal("the authorization server issued no token")
	}
	for _, path := range []string{page, "/console/instances", "/console/catalog/notes/install?instance=notes"} {
		for _, sess := range []string{member, s.Session} {
			p := s.get(t, path, sess)
			for _, tok := range issued {
				if strings.Contains(p.body, tok) {
					t.Errorf("%s shows an issued token", path)
				}
			}
		}
	}

	// Disconnect needs the session's CSRF token; then the grant is gone.
	if p := s.post(t, page+"/disconnect", member, form(s.Session)); p.status != 403 || !strings.Contains(p.body, "csrf_failed") {
		t.Errorf("disconnect with another session's token: status %d", p.status)
	}
	if p := s.get(t, page, member); !strings.Contains(p.body, `id="grant-state">Connected<`) {
		t.Fatal("a refused disconnect disconnected")
	}
	p = s.post(t, page+"/disconnect", member, form(member))
	if p.status != 303 || p.header.Get("Location") != page+"?done=disconnected" {
		t.Fatalf("disconnect: status %d, Location %q", p.status, p.header.Get("Location"))
	}
	p = s.get(t, p.header.Get("Location"), member)
	if !strings.Contains(p.body, `id="grant-state">Not connected<`) || !strings.Contains(p.body, "Your account is disconnected") {
		t.Error("after disconnecting the page does not say not connected")
	}
	s.Audit().Flush(ctx)
	rowsAfter, err := s.AuditStore().List(ctx, tenant.ID, audit.Query{Instance: "notes"})
	if err != nil || !slices.ContainsFunc(rowsAfter, func(e audit.Entry) bool { return e.Action == "grant.disconnect" && e.Subject == miaID }) {
		t.Errorf("no grant.disconnect audit row (%v)", err)
	}
}

func readBody(t testing.TB, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInstanceGrantReconnect shows a grant the provider revoked as
// needing reconnecting, to its member (with Reconnect) and to admins.
func TestInstanceGrantReconnect(t *testing.T) {
	t.Parallel()
	s := startNotes(t)
	ctx := context.Background()
	// Access tokens live seconds, so that a use soon refreshes.
	as := installOAuth(t, s, authztest.Options{AccessTokenLifespan: 5 * time.Second})
	miaID, member := s.sessionAs(t, "member@acme.test", members.RoleMember)
	connectMember(t, s, as, member)
	// The provider revokes the member's tokens; the first use after the
	// access token expired refreshes, and finds out.
	as.RevokeSubject("member@acme.test")
	st, err := connectflow.NewGrants(s.Gateway(), s.OAuth()).Status(ctx, "acme", "notes", miaID)
	if err != nil || !st.Connected || time.Until(st.ExpiresAt) > 10*time.Second {
		t.Fatalf("the member's grant: %+v (%v); want connected, expiring within seconds", st, err)
	}
	time.Sleep(time.Until(st.ExpiresAt) + 100*time.Millisecond)
	if res, err := s.Gateway().Test(ctx, "acme", "notes", miaID); err != nil || res.OK {
		t.Fatalf("using a revoked grant: %+v, %v", res, err)
	}
	p := s.get(t, "/console/instances/notes", member)
	for _, w := range []string{`id="grant-state">Needs reconnecting<`, "Reconnect your account", `id="disconnect"`} {
		if !strings.Contains(p.body, w) {
			t.Errorf("member's page with a revoked grant lacks %q", w)
		}
	}
	if p := s.get(t, "/console/instances/notes", s.Session); !regexp.MustCompile(`<td>member@acme.test</td>\s*<td><span class="grant reconnect">`).MatchString(p.body) {
		t.Error("the admins' table does not show the member's grant as needing reconnecting")
	}
	// Connect on an instance that has no per-user accounts is refused.
	installKey(t, s, notesUpstream(t, nil).URL, "bot")
	if p := s.post(t, "/console/instances/notes-key/connect", member, form(member)); p.status != 400 || !strings.Contains(p.body, "<code>not_oauth</code>") {
		t.Errorf("connect on an apiKey instance: status %d", p.status)
	}
}
