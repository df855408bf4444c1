package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
)

// operatorLink mints an operator sign-in link's token on the store, as
// `switchboard admin login-link --operator` does.
func (s *consoleServer) operatorLink(t testing.TB, ttl time.Duration) string {
	t.Helper()
	_, token, err := s.Members().CreateOperatorLink(context.Background(), members.ActorOperator, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return token.Reveal()
}

// redeem posts a sign-in link's confirmation form, as the browser does,
// and returns the response and the session cookie it set.
func (s *consoleServer) redeem(t testing.TB, token string) (page, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+signin.LinkPath, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.URL)
	p := s.do(t, req, "")
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == s.SignIn().SessionCookie() && c.Value != "" {
			return p, c.Value
		}
	}
	return p, ""
}

// operatorSession signs the operator in through an operator sign-in link.
func (s *consoleServer) operatorSession(t testing.TB) string {
	t.Helper()
	p, session := s.redeem(t, s.operatorLink(t, 0))
	if p.status != http.StatusSeeOther || session == "" {
		t.Fatalf("redeeming an operator link: status %d, session %v\n%s", p.status, session != "", p.body)
	}
	return session
}

// TestOperatorSignIn signs the operator in with an operator sign-in link:
// its GET only shows the confirmation form, the POST starts an operator
// session and leads to the operator's pages; the link works once and not
// after its lifetime. The operator session opens the operator pages and
// the catalog, not a tenant's pages.
func TestOperatorSignIn(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	token := s.operatorLink(t, 0)
	if p := s.get(t, signin.LinkPath+"?token="+url.QueryEscape(token), ""); p.status != 200 || !strings.Contains(p.body, `<form method="post"`) {
		t.Fatalf("opening the link: status %d\n%s", p.status, p.body)
	}
	p, session := s.redeem(t, token)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/operator/tenants" || !members.IsOperatorSession(session) {
		t.Fatalf("confirming: status %d, Location %q, operator session %v", p.status, p.header.Get("Location"), members.IsOperatorSession(session))
	}
	if again, cookie := s.redeem(t, token); again.status != http.StatusUnauthorized || cookie != "" || !strings.Contains(again.body, "invalid_link") {
		t.Errorf("the link a second time: status %d, session set %v", again.status, cookie != "")
	}
	late := s.operatorLink(t, time.Second)
	time.Sleep(1100 * time.Millisecond)
	if expired, cookie := s.redeem(t, late); expired.status != http.StatusUnauthorized || cookie != "" {
		t.Errorf("an expired link: status %d, session set %v", expired.status, cookie != "")
	}

	if p := s.get(t, "/console/", session); p.status != http.StatusFound || p.header.Get("Location") != "/console/operator/tenants" {
		t.Errorf("the start page for the operator: %d → %q", p.status, p.header.Get("Location"))
	}
	home := s.get(t, "/console/operator/tenants", session)
	for _, w := range []string{"<h1>Tenants</h1>", "Platform operator", `<span class="role">operator</span>`,
		`<a href="/console/operator/providers"`, `<code>acme</code>`, "Sign out"} {
		if home.status != 200 || !strings.Contains(home.body, w) {
			t.Errorf("operator home: status %d, lacks %q", home.status, w)
		}
	}
	if strings.Contains(home.body, `href="/console/instances"`) {
		t.Errorf("the operator's navigation links to a tenant's pages")
	}
	if p := s.get(t, "/console/catalog", session); p.status != 200 {
		t.Errorf("the catalog for the operator: %d", p.status)
	}
	if p := s.get(t, "/console/instances", session); p.status != http.StatusForbidden || !strings.Contains(p.body, "a tenant&#39;s pages need a member&#39;s sign-in link") {
		t.Errorf("a tenant's page for the operator: %d\n%s", p.status, p.body)
	}
	// Sign out ends the operator session; Sign out everywhere ends every
	// operator session, and no member's.
	if out := s.post(t, signin.SignOutPath, session, url.Values{"csrf_token": {members.CSRFToken(session)}}); out.status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", out.status)
	}
	if p := s.get(t, "/console/operator/tenants", session); p.status != http.StatusUnauthorized {
		t.Errorf("after signing out: %d, want Sign in", p.status)
	}
	first, second := s.operatorSession(t), s.operatorSession(t)
	if out := s.post(t, signin.SignOutEverywherePath, first, url.Values{"csrf_token": {members.CSRFToken(first)}}); out.status != http.StatusSeeOther {
		t.Fatalf("sign out everywhere: %d", out.status)
	}
	for _, sess := range []string{first, second} {
		if p := s.get(t, "/console/operator/tenants", sess); p.status != http.StatusUnauthorized {
			t.Errorf("an operator session after sign out everywhere: %d, want Sign in", p.status)
		}
	}
	if p := s.get(t, "/console/instances", s.Session); p.status != 200 {
		t.Errorf("the owner's session after the operator signed out everywhere: %d", p.status)
	}
}

// operatorURLs are every operator page and action, with a form that
// would change something if it were accepted.
var operatorURLs = []struct {
	method, path string
	form         url.Values
}{
	{"GET", "/console/operator/tenants", nil},
	{"POST", "/console/operator/tenants", url.Values{"slug": {"evil"}, "name": {"Evil"}}},
	{"POST", "/console/operator/tenants/invite", url.Values{"tenant": {"acme"}, "email": {"evil@example.com"}}},
	{"GET", "/console/operator/providers", nil},
	{"GET", "/console/operator/providers?edit=gh", nil},
	{"GET", "/console/operator/providers?delete=gh", nil},
	{"POST", "/console/operator/providers", url.Values{"slug": {"evil"}, "revision": {"0"}, "authorize_url": {"https://evil.test/a"},
		"token_url": {"https://evil.test/t"}, "client_id": {"x"}, "client_secret": {"y"}}},
	{"POST", "/console/operator/providers/gh/delete", url.Values{}},
	{"GET", "/console/operator/tokens", nil},
	{"POST", "/console/operator/tokens", url.Values{"name": {"evil"}}},
	{"POST", "/console/operator/tokens/opt_generated_0/revoke", url.Values{}},
	{"GET", "/console/operator/", nil},
	{"GET", "/console/operator/nothing", nil},
}

// TestOperatorPagesRestricted opens every operator URL as a tenant's
// owner, admin and member, with a valid CSRF token on the forms: each
// gets Access restricted (403), never a form or a provider's data, and
// nothing changes. Signed out, they get Sign in.
func TestOperatorPagesRestricted(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	ctx := context.Background()
	if _, _, err := s.Operators().GenerateFirst(ctx); err != nil {
		t.Fatal(err)
	}
	op := s.operatorSession(t)
	const secret = "central_client_secret_restricted"
	if p := s.post(t, "/console/operator/providers", op, url.Values{"csrf_token": {members.CSRFToken(op)}, "slug": {"gh"}, "revision": {"0"},
		"name": {"GitHub central"}, "authorize_url": {"https://github.test/authorize"}, "token_url": {"https://github.test/token"},
		"client_id": {"Iv1.central"}, "client_secret": {secret}}); p.status != http.StatusSeeOther {
		t.Fatalf("registering a provider: %d\n%s", p.status, p.body)
	}
	counts := func() [4]int {
		tl, _ := s.Tenants().ListTenants(ctx)
		pl, _ := s.Providers().List(ctx)
		ol, _ := s.Operators().List(ctx)
		revoked := 0
		for _, o := range ol {
			if o.RevokedAt != nil {
				revoked++
			}
		}
		return [4]int{len(tl), len(pl), len(ol), revoked}
	}
	before := counts()
	_, admin := s.sessionAs(t, "admin@acme.test", members.RoleAdmin)
	_, member := s.sessionAs(t, "member@acme.test", members.RoleMember)
	sessions := map[string]string{"owner": s.Session, "admin": admin, "member": member}
	for who, session := range sessions {
		for _, u := range operatorURLs {
			var p page
			if u.method == "GET" {
				p = s.get(t, u.path, session)
			} else {
				f := url.Values{"csrf_token": {members.CSRFToken(session)}}
				for k, v := range u.form {
					f[k] = v
				}
				p = s.post(t, u.path, session, f)
			}
			if p.status != http.StatusForbidden || !strings.Contains(p.body, "<h1>Access restricted</h1>") {
				t.Errorf("%s %s as %s: status %d, want 403 Access restricted", u.method, u.path, who, p.status)
			}
			for _, leak := range []string{"<form class=\"form\"", "GitHub central", "github.test", "Iv1.central", secret, "opt_generated_0", "Register a provider"} {
				if strings.Contains(p.body, leak) {
					t.Errorf("%s %s as %s: the page shows %q", u.method, u.path, who, leak)
				}
			}
		}
		if p := s.get(t, "/console/instances", session); p.status != 200 || strings.Contains(p.body, "/console/operator/") {
			t.Errorf("%s's own pages: status %d, or they link to the operator's", who, p.status)
		}
	}
	if after := counts(); after != before {
		t.Fatalf("refused forms changed something: %v, then %v", before, after)
	}
	for _, u := range operatorURLs {
		if u.method == "GET" {
			if p := s.get(t, u.path, ""); p.status != http.StatusUnauthorized || strings.Contains(p.body, "GitHub central") {
				t.Errorf("GET %s signed out: status %d, want Sign in", u.path, p.status)
			}
		}
	}
}

// onceValue finds the credential shown once, in its read-only input with
// a copy button.
var onceValue = regexp.MustCompile(`<input readonly id="once-value" value="([^"]+)" aria-labelledby="once-heading" autocomplete="off" spellcheck="false">\s*<button type="button" class="copy" data-copy="once-value" hidden>Copy</button><span class="copy-status" role="status"></span>`)

// TestOperatorPages drives every operator page and action with the
// operator's session: a form without the CSRF token changes nothing;
// tenants are created and their first owner invited (the link shown once
// works); a provider is registered, replaced with its secret kept when
// left empty, and deleted after confirmation, its secret never in a page;
// an operator token is created (shown once, working, never shown again)
// and revoked.
func TestOperatorPages(t *testing.T) {
	t.Parallel()
	s := startConsole(t)
	ctx := context.Background()
	op := s.operatorSession(t)
	csrf := members.CSRFToken(op)
	form := func(kv ...string) url.Values {
		f := url.Values{"csrf_token": {csrf}}
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	var seen []string // every page the operator saw after a secret was made

	// Without the CSRF token (or with another session's), nothing changes.
	for _, bad := range []url.Values{{"slug": {"beta"}}, {"slug": {"beta"}, "csrf_token": {members.CSRFToken(s.Session)}}} {
		if p := s.post(t, "/console/operator/tenants", op, bad); p.status != http.StatusForbidden || !strings.Contains(p.body, "csrf_failed") {
			t.Errorf("create tenant without the CSRF token: %d", p.status)
		}
	}
	if p := s.post(t, "/console/operator/tokens", op, url.Values{"name": {"x"}}); p.status != http.StatusForbidden {
		t.Errorf("create token without the CSRF token: %d", p.status)
	}
	if _, err := s.Tenants().Tenant(ctx, "beta"); err == nil {
		t.Fatal("a tenant was created without the CSRF token")
	}

	// Tenants.
	if p := s.post(t, "/console/operator/tenants", op, form("slug", "Not A Slug", "name", "Bad")); p.status != 400 ||
		!strings.Contains(p.body, "invalid_slug") || !strings.Contains(p.body, `value="Not A Slug"`) {
		t.Errorf("an invalid slug: %d\n%s", p.status, p.body)
	}
	p := s.post(t, "/console/operator/tenants", op, form("slug", "beta", "name", "Beta Corp"))
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/operator/tenants?created=beta" {
		t.Fatalf("create tenant: %d %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	list := s.get(t, "/console/operator/tenants?created=beta", op)
	for _, w := range []string{"<td>Beta Corp</td>", `name="tenant" list="tenant-slugs" value="beta"`, "no owner yet",
		`<span class="visually-hidden">Members: </span>1`} {
		if !strings.Contains(list.body, w) {
			t.Errorf("tenants overview lacks %q", w)
		}
	}
	if p := s.post(t, "/console/operator/tenants/invite", op, form("tenant", "beta", "email", "not an email")); p.status != 400 || !strings.Contains(p.body, "invalid_email") {
		t.Errorf("inviting a bad email: %d", p.status)
	}
	inv := s.post(t, "/console/operator/tenants/invite", op, form("tenant", "beta", "email", "boss@beta.test"))
	m := onceValue.FindStringSubmatch(inv.body)
	if inv.status != 200 || m == nil {
		t.Fatalf("invite: status %d, no link shown once with a copy button\n%s", inv.status, inv.body)
	}
	link, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
	if err != nil || !strings.HasPrefix(link.String(), s.URL+signin.LinkPath) {
		t.Fatalf("invitation link %q", m[1])
	}
	// The operator who is that owner opens it here (TestBrowserJourney
	// follows it in a browser).
	if !strings.Contains(inv.body, `<a class="button" id="once-open" href="`+m[1]+`&amp;next=%2Fconsole%2F">Open it in this browser as boss@beta.test</a>`) {
		t.Errorf("the invitation has no link that opens it in this browser\n%s", inv.body)
	}
	owner, err := s.Members().Redeem(ctx, link.Query().Get("token"))
	if err != nil || owner.Role != members.RoleOwner || owner.Email != "boss@beta.test" {
		t.Fatalf("the invitation link: %+v, %v", owner, err)
	}
	s.Audit().Flush(ctx)
	if n := dbtest.Count(t, s.DB(), "audit_log", "action = 'invitation.create:owner' AND actor LIKE 'operator:oses_%' AND subject = 'boss@beta.test'"); n != 1 {
		t.Errorf("%d audit rows of the invitation naming the operator's session, want 1", n)
	}
	if p := s.get(t, "/console/operator/tenants", op); strings.Contains(p.body, link.Query().Get("token")) || strings.Contains(p.body, "no owner yet") {
		t.Errorf("the overview shows the invitation link again, or beta still has no owner")
	}

	// Providers.
	const secret = "central_secret_typed_once_1"
	if p := s.get(t, "/console/operator/providers", op); p.status != 200 || !strings.Contains(p.body, "No provider registered") ||
		!strings.Contains(p.body, s.URL+"/oauth/callback") {
		t.Errorf("empty providers page: %d", p.status)
	}
	reg := form("slug", "gh", "revision", "0", "name", "GitHub", "authorize_url", "https://github.test/login/oauth/authorize",
		"token_url", "https://github.test/login/oauth/access_token", "scopes", "repo read:user", "auth_params", "allow_signup=false",
		"auth_style", "params", "client_id", "Iv1.abc", "client_secret", secret)
	bad := form("slug", "gh", "revision", "0", "authorize_url", "ftp://x", "token_url", "https://github.test/t", "client_secret", secret)
	if p := s.post(t, "/console/operator/providers", op, bad); p.status != 400 || !strings.Contains(p.body, "invalid_provider") || strings.Contains(p.body, secret) {
		t.Errorf("an invalid provider: %d, or the typed secret rendered back", p.status)
	}
	if p := s.post(t, "/console/operator/providers", op, reg); p.status != http.StatusSeeOther {
		t.Fatalf("register: %d\n%s", p.status, p.body)
	}
	if p := s.post(t, "/console/operator/providers", op, reg); p.status != http.StatusConflict || strings.Contains(p.body, secret) {
		t.Errorf("registering gh again as new: %d, want 409 without the secret", p.status)
	}
	pl := s.get(t, "/console/operator/providers", op)
	seen = append(seen, pl.body)
	for _, w := range []string{"GitHub <code>gh</code>", "Client id set", "Client secret set", "<code>read:user</code>"} {
		if !strings.Contains(pl.body, w) {
			t.Errorf("providers page lacks %q", w)
		}
	}
	edit := s.get(t, "/console/operator/providers?edit=gh", op)
	seen = append(seen, edit.body)
	for _, w := range []string{"Replace gh", `name="revision" value="1"`, `>allow_signup=false</textarea>`, "A value is set. Leave empty to keep it",
		`id="client_secret" name="client_secret" type="password" autocomplete="off"`, `id="style-params" name="auth_style" value="params" checked`} {
		if !strings.Contains(edit.body, w) {
			t.Errorf("replace form lacks %q", w)
		}
	}
	keep := form("slug", "gh", "revision", "1", "edit", "1", "name", "GitHub central", "authorize_url", "https://github.test/login/oauth/authorize",
		"token_url", "https://github.test/login/oauth/access_token", "auth_style", "params")
	if p := s.post(t, "/console/operator/providers", op, keep); p.status != http.StatusSeeOther {
		t.Fatalf("replace keeping the secret: %d\n%s", p.status, p.body)
	}
	got, err := s.Providers().Get(ctx, "gh")
	if err != nil || got.ClientSecret.Reveal() != secret || got.ClientID.Reveal() != "Iv1.abc" || got.Name != "GitHub central" {
		t.Fatalf("after replacing with the secret left empty: name %q, secret kept %v, id kept %v (%v)", got.Name,
			got.ClientSecret.Reveal() == secret, got.ClientID.Reveal() == "Iv1.abc", err)
	}
	if p := s.post(t, "/console/operator/providers", op, keep); p.status != http.StatusConflict {
		t.Errorf("replacing from a stale form: %d, want 409", p.status)
	}
	confirm := s.get(t, "/console/operator/providers?delete=gh", op)
	seen = append(seen, confirm.body)
	if !strings.Contains(confirm.body, `action="/console/operator/providers/gh/delete"`) || !strings.Contains(confirm.body, "Delete GitHub central") {
		t.Errorf("the delete confirmation is missing")
	}
	if _, err := s.Providers().View(ctx, "gh"); err != nil {
		t.Fatalf("opening the confirmation deleted the provider: %v", err)
	}
	if p := s.post(t, "/console/operator/providers/gh/delete", op, form()); p.status != http.StatusSeeOther {
		t.Fatalf("delete: %d", p.status)
	}
	if _, err := s.Providers().View(ctx, "gh"); err == nil {
		t.Fatal("the provider is still registered")
	}

	// Operator tokens.
	created := s.post(t, "/console/operator/tokens", op, form("name", "terraform"))
	m = onceValue.FindStringSubmatch(created.body)
	if created.status != 200 || m == nil {
		t.Fatalf("create token: status %d, no token shown once with a copy button\n%s", created.status, created.body)
	}
	token := m[1]
	if !s.Operators().Verify(ctx, token) {
		t.Fatal("the token shown does not work")
	}
	tl := s.get(t, "/console/operator/tokens", op)
	seen = append(seen, tl.body, s.get(t, "/console/operator/tenants", op).body)
	if !strings.Contains(tl.body, "terraform") || !strings.Contains(tl.body, "Revoke<span class=\"visually-hidden\"> terraform</span>") {
		t.Errorf("token list lacks the token or its Revoke button")
	}
	ops, _ := s.Operators().List(ctx)
	if p := s.post(t, "/console/operator/tokens/"+ops[0].ID+"/revoke", op, form()); p.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", p.status)
	}
	if s.Operators().Verify(ctx, token) {
		t.Error("the revoked token still works")
	}
	if p := s.get(t, "/console/operator/tokens", op); !strings.Contains(p.body, "revoked ") {
		t.Errorf("the token list does not show the revocation")
	}
	for i, body := range seen {
		if strings.Contains(body, secret) || strings.Contains(body, token) || strings.Contains(body, "Iv1.abc") {
			t.Errorf("page %d shows the provider's secret or client id, or the operator token", i)
		}
		if m := inlineCode.FindString(body); m != "" {
			t.Errorf("page %d: inline code %q", i, m)
		}
	}
}
