package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

const pickerOIDCSecret = "picker-oidc-client-secret"

// pickerServer is a console server whose people sign in with a real
// (fosite) OpenID Connect provider on loopback, with tenants acme, globex
// and initech, all invitation only.
type pickerServer struct {
	*consoleServer
	tenants map[string]switchboard.TenantID
}

func startPicker(t *testing.T) *pickerServer {
	t.Helper()
	idp := authztest.New(t, authztest.Options{})
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t),
		OIDCIssuers: []signin.OIDCIssuer{{Name: "corp", Issuer: idp.Issuer(), ClientID: "switchboard", ClientSecret: secrets.New(pickerOIDCSecret)}}})
	idp.AddClient(authztest.Client{ID: "switchboard", Secret: pickerOIDCSecret, RedirectURIs: []string{srv.URL + signin.OIDCIssuer{Name: "corp"}.CallbackPath()},
		Scopes: []string{"openid", "email"}})
	p := &pickerServer{consoleServer: &consoleServer{Server: srv}, tenants: map[string]switchboard.TenantID{}}
	for _, slug := range []string{"acme", "globex", "initech"} {
		tn, err := srv.Tenants().CreateTenant(context.Background(), slug, strings.ToUpper(slug[:1])+slug[1:])
		if err != nil {
			t.Fatal(err)
		}
		p.tenants[slug] = tn.ID
	}
	return p
}

// add makes email a member of tenant with role.
func (p *pickerServer) add(t *testing.T, tenant, email string, role members.Role) members.Member {
	t.Helper()
	m, err := p.Members().AddMember(context.Background(), members.ActorOperator, p.tenants[tenant], email, role)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// signInOIDC signs login in to tenant through the identity provider, as
// a browser does, and returns the session cookie's value.
func (p *pickerServer) signInOIDC(t *testing.T, tenant, login string) string {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, p.URL+signin.OIDCStartPath+"?tenant="+tenant, nil)
	req.Header.Set(authztest.LoginHeader, login)
	res, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	u, _ := url.Parse(p.URL)
	for _, c := range jar.Cookies(u) {
		if c.Name == p.SignIn().SessionCookie() {
			return c.Value
		}
	}
	t.Fatalf("OIDC sign-in of %s to %s: %d %s", login, tenant, res.StatusCode, body)
	return ""
}

// switchTo posts the picker's form for tenant with session's CSRF token.
func (p *pickerServer) switchTo(t *testing.T, session, tenant string) page {
	t.Helper()
	return p.post(t, "/console/tenants/switch", session, url.Values{"csrf_token": {members.CSRFToken(session)}, "tenant": {string(p.tenants[tenant])}})
}

// newSession returns the session cookie a response sets.
func (p *pickerServer) newSession(pg page) string {
	for _, c := range (&http.Response{Header: pg.header}).Cookies() {
		if c.Name == p.SignIn().SessionCookie() && c.Value != "" {
			return c.Value
		}
	}
	return ""
}

// TestTenantPicker checks the picker's rule through the console: a
// person signed in with their identity provider sees and switches to the
// tenants where the same provider account is a member (a new session,
// the old one ended, CSRF required), and nothing else. An owner of
// another tenant who invites that person's email and opens the
// invitation herself sees no other tenant and switches nowhere, and the
// person she impersonates keeps everything and is offered that tenant
// only as "sign in there".
func TestTenantPicker(t *testing.T) {
	t.Parallel()
	p := startPicker(t)
	p.add(t, "acme", "alice@corp.test", members.RoleOwner)
	p.add(t, "globex", "alice@corp.test", members.RoleMember)
	// Alice signed in to globex with her provider once, then to acme.
	p.signInOIDC(t, "globex", "alice@corp.test")
	alice := p.signInOIDC(t, "acme", "alice@corp.test")

	pg := p.get(t, "/console/tenants", alice)
	if pg.status != 200 || !strings.Contains(pg.body, "You are in <strong>Acme</strong> as owner") ||
		!strings.Contains(pg.body, "Switch to Globex") || !strings.Contains(pg.body, `value="`+string(p.tenants["globex"])+`"`) ||
		strings.Contains(pg.body, "Initech") || inlineCode.MatchString(pg.body) {
		t.Fatalf("Alice's picker: %d %s", pg.status, pg.body)
	}
	// Every page's header offers the same switch.
	if pg := p.get(t, "/console/audit", alice); !strings.Contains(pg.body, `<details class="tenant-menu">`) ||
		!strings.Contains(pg.body, `Globex <span class="menu-role">member</span>`) {
		t.Errorf("the header has no tenant menu with globex: %s", pg.body)
	}
	// A switch needs the session's CSRF token.
	noToken := p.post(t, "/console/tenants/switch", alice, url.Values{"tenant": {string(p.tenants["globex"])}})
	if noToken.status != 403 || p.newSession(noToken) != "" {
		t.Fatalf("switch without the CSRF token: %d", noToken.status)
	}
	sw := p.switchTo(t, alice, "globex")
	inGlobex := p.newSession(sw)
	if sw.status != http.StatusSeeOther || sw.header.Get("Location") != "/console/instances" || inGlobex == "" || inGlobex == alice {
		t.Fatalf("switch: %d to %q, new session %t", sw.status, sw.header.Get("Location"), inGlobex != "")
	}
	if pg := p.get(t, "/console/tenants", alice); pg.status != 401 {
		t.Errorf("the session switched from still works: %d", pg.status)
	}
	if pg := p.get(t, "/console/tenants", inGlobex); !strings.Contains(pg.body, "You are in <strong>Globex</strong> as member") ||
		!strings.Contains(pg.body, "Switch to Acme") {
		t.Errorf("after the switch: %s", pg.body)
	}
	alice = p.newSession(p.switchTo(t, inGlobex, "acme"))
	if alice == "" {
		t.Fatal("switching back failed")
	}

	// Mallory owns initech and signed in with a one-time link. She
	// invites Alice's email and opens the invitation herself.
	mallory := p.add(t, "initech", "mallory@evil.test", members.RoleOwner)
	ctx := context.Background()
	_, inv, err := p.Members().Invite(ctx, mallory.UserID, p.tenants["initech"], "alice@corp.test", members.RoleAdmin, 0)
	if err != nil {
		t.Fatal(err)
	}
	fake, err := p.Members().Redeem(ctx, inv.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := p.Members().CreateSession(ctx, p.tenants["initech"], fake.UserID)
	if err != nil {
		t.Fatal(err)
	}
	fakeAlice := tok.Reveal()
	pg = p.get(t, "/console/tenants", fakeAlice)
	if pg.status != 200 || !strings.Contains(pg.body, "Signed in with a one-time link") ||
		strings.Contains(pg.body, "Acme") || strings.Contains(pg.body, "Globex") || strings.Contains(pg.body, "/console/tenants/switch") {
		t.Errorf("the impersonator's picker shows other tenants: %s", pg.body)
	}
	for _, target := range []string{"acme", "globex"} {
		pg := p.switchTo(t, fakeAlice, target)
		if pg.status != 403 || !strings.Contains(pg.body, "switch_refused") || p.newSession(pg) != "" {
			t.Errorf("impersonator switching to %s: %d", target, pg.status)
		}
	}
	if pg := p.get(t, "/console/instances", fakeAlice); pg.status != 200 || !strings.Contains(pg.body, "Initech") || strings.Contains(pg.body, "tenant-menu") {
		t.Errorf("a refused switch changed the impersonator's session: %d", pg.status)
	}

	// Alice keeps acme (owner, same session) and is offered initech only
	// as a sign-in of her own, never as a switch.
	pg = p.get(t, "/console/tenants", alice)
	if pg.status != 200 || !strings.Contains(pg.body, "as owner") || !strings.Contains(pg.body, "Sign in needed") ||
		!strings.Contains(pg.body, "/signin/oidc/start?tenant=initech") || strings.Contains(pg.body, "Switch to Initech") {
		t.Errorf("Alice's picker after the invitation: %s", pg.body)
	}
	if pg := p.switchTo(t, alice, "initech"); pg.status != 403 || p.newSession(pg) != "" {
		t.Errorf("Alice switching to the impersonated row: %d", pg.status)
	}
	if pg := p.get(t, "/console/instances", alice); pg.status != 200 || !strings.Contains(pg.body, "Acme") {
		t.Errorf("Alice lost her acme session: %d", pg.status)
	}
	// Nobody switches to a tenant that does not exist, or without a tenant.
	for _, form := range []url.Values{{"tenant": {"ten_nope"}}, {"tenant": {""}}} {
		form.Set("csrf_token", members.CSRFToken(alice))
		if pg := p.post(t, "/console/tenants/switch", alice, form); pg.status/100 != 4 || p.newSession(pg) != "" {
			t.Errorf("switch to %q: %d", form.Get("tenant"), pg.status)
		}
	}
}
