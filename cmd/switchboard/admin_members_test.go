package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
)

// admin invite prints a link on --public-url whose token makes the person
// a member; admin login-link mints one for a member only; both are
// audited as the operator's.
func TestAdminInviteAndLoginLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, db := migratedDataDir(t)
	var out, errOut bytes.Buffer
	tn, err := tenants.NewStore(db, nil).CreateTenant(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	admin := func(args ...string) (string, error) {
		out.Reset()
		errOut.Reset()
		err := run(ctx, append([]string{"admin"}, append(args, "--data-dir", dir, "--public-url", "https://sb.example.com")...), envMap(nil), &out, &errOut)
		return strings.TrimSpace(out.String()), err
	}

	_, err = admin("login-link", "--tenant", "acme", "--email", "ann@example.com")
	if switchboard.CodeOf(err) != "member_not_found" {
		t.Fatalf("login-link for a stranger: %v", err)
	}
	if _, err := admin("invite", "--tenant", "acme", "--email", "ann@example.com", "--role", "king"); switchboard.CodeOf(err) != "invalid_role" {
		t.Fatalf("invite with a bad role: %v", err)
	}
	if _, err := admin("invite", "--tenant", "nope", "--email", "ann@example.com", "--role", "owner"); switchboard.CodeOf(err) != "tenant_not_found" {
		t.Fatalf("invite to an unknown tenant: %v", err)
	}
	if _, err := admin("invite", "--tenant", "acme", "--email", "ann@example.com"); err == nil {
		t.Fatal("invite without --role worked")
	}
	if n := dbtest.Count(t, db, "member_invitations", ""); n != 0 {
		t.Fatalf("refused commands stored %d invitations", n)
	}

	link, err := admin("invite", "--tenant", "acme", "--email", "Ann@Example.com", "--role", "owner")
	if err != nil {
		t.Fatalf("invite: %v\n%s", err, errOut.String())
	}
	u, err := url.Parse(link)
	if err != nil || u.Scheme != "https" || u.Host != "sb.example.com" || u.Path != signin.LinkPath {
		t.Fatalf("invite printed %q", link)
	}
	if strings.Contains(errOut.String(), u.Query().Get("token")) {
		t.Fatal("the token is on stderr too")
	}
	store := members.NewStore(db, discardRecorder{}, members.Options{})
	m, err := store.Redeem(ctx, u.Query().Get("token"))
	if err != nil || m.Email != "ann@example.com" || m.Role != members.RoleOwner || m.Tenant != tn.ID {
		t.Fatalf("redeeming the printed link: %+v, %v", m, err)
	}

	link, err = admin("login-link", "--tenant", "acme", "--email", "ann@example.com", "--lifetime", "10m")
	if err != nil {
		t.Fatalf("login-link: %v", err)
	}
	u, _ = url.Parse(link)
	if again, err := store.Redeem(ctx, u.Query().Get("token")); err != nil || again.UserID != m.UserID {
		t.Fatalf("redeeming the login link: %+v, %v", again, err)
	}
	// Without --public-url the link is built on --addr, as serve's are.
	out.Reset()
	if err := run(ctx, []string{"admin", "login-link", "--tenant", "acme", "--email", "ann@example.com", "--data-dir", dir, "--addr", "127.0.0.1:8123"},
		envMap(nil), &out, &errOut); err != nil || !strings.HasPrefix(out.String(), "http://127.0.0.1:8123"+signin.LinkPath+"?token=") {
		t.Fatalf("login-link without --public-url printed %q (%v)", out.String(), err)
	}
	if n := dbtest.Count(t, db, "audit_log", "tenant_id = $1 AND actor = $2 AND action IN ('invitation.create:owner', 'login_link.create')",
		string(tn.ID), members.ActorOperator); n != 3 {
		t.Fatalf("%d audit rows of the operator's links, want 3", n)
	}
}

// migratedDataDir is a data directory migrated by "switchboard migrate",
// and its store.
func migratedDataDir(t *testing.T) (string, *database.DB) {
	t.Helper()
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "--data-dir", dir}, envMap(nil), &out, &out); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	return dir, openDataDir(t, dir)
}

// discardRecorder drops audit entries (the test reads the command's rows).
type discardRecorder struct{}

func (discardRecorder) Admit() (audit.Admission, error) {
	return audit.AdmitTo(func(audit.Entry) {}), nil
}
func (discardRecorder) Record(audit.Entry) {}

// OpenID Connect settings are checked at start: issuer and client id go
// together, and tenant domains are tenant=domain pairs.
func TestOIDCSettingsValidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SWITCHBOARD_OIDC_ISSUER": "https://idp.example.test"}, "--oidc-client-id"},
		{map[string]string{"SWITCHBOARD_OIDC_ISSUER": "idp", "SWITCHBOARD_OIDC_CLIENT_ID": "sb"}, "absolute URL"},
		{map[string]string{"SWITCHBOARD_OIDC_TENANT_DOMAINS": "acme"}, "tenant=domain"},
		{map[string]string{"SWITCHBOARD_OIDC_TENANT_DOMAINS": "acme=a@example.com"}, "tenant=domain"},
	} {
		_, err := parseConfig("serve", nil, envMap(tc.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error about %s", tc.env, err, tc.want)
		}
	}
	c, err := parseConfig("serve", nil, envMap(map[string]string{"SWITCHBOARD_OIDC_ISSUER": "https://idp.example.test",
		"SWITCHBOARD_OIDC_CLIENT_ID": "sb", "SWITCHBOARD_OIDC_TENANT_DOMAINS": "acme=Example.com, acme=example.org,globex=globex.test"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := c.oidcDomains()
	if strings.Join(d["acme"], ",") != "example.com,example.org" || strings.Join(d["globex"], ",") != "globex.test" {
		t.Fatalf("domains %v", d)
	}
	if is, _ := c.oidcIssuers(); len(is) != 1 || is[0].Issuer != "https://idp.example.test" || is[0].ClientID != "sb" || is[0].Name != "" ||
		is[0].CallbackPath() != "/signin/oidc/callback" {
		t.Fatalf("issuers %+v", is)
	}
}

// Several OpenID Connect issuers: --oidc-issuer name=URL pairs, client ids
// by name, each secret from SWITCHBOARD_OIDC_CLIENT_SECRET_<NAME>; the
// start-up printout says which secrets are set, never their values.
func TestOIDCSeveralIssuersSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"SWITCHBOARD_OIDC_ISSUER":                    "google=https://accounts.google.test, corp-sso=https://sso.corp.test/realms/x",
		"SWITCHBOARD_OIDC_CLIENT_ID":                 "corp-sso=sb-corp,google=sb-google",
		"SWITCHBOARD_OIDC_CLIENT_SECRET_GOOGLE":      "canary-google-secret-41",
		"SWITCHBOARD_OIDC_CLIENT_SECRET":             "canary-unused-secret-42",
		"SWITCHBOARD_OIDC_CLIENT_SECRET_CORP_SSO_NO": "not read",
	}
	c, err := parseConfig("serve", nil, envMap(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	is, err := c.oidcIssuers()
	if err != nil || len(is) != 2 {
		t.Fatalf("issuers %+v, %v", is, err)
	}
	if is[0].Name != "google" || is[0].Issuer != "https://accounts.google.test" || is[0].ClientID != "sb-google" ||
		is[0].ClientSecret.Reveal() != "canary-google-secret-41" || is[0].CallbackPath() != "/signin/oidc/callback/google" {
		t.Errorf("first issuer %+v", is[0])
	}
	if is[1].Name != "corp-sso" || is[1].ClientID != "sb-corp" || !is[1].ClientSecret.IsZero() || is[1].CallbackPath() != "/signin/oidc/callback/corp-sso" {
		t.Errorf("second issuer %+v", is[1])
	}
	// The printout: per issuer set or unset, no value.
	var out strings.Builder
	slog.New(slog.NewTextHandler(&out, nil)).Info("start", "config", c.logValue())
	if !strings.Contains(out.String(), "google: set, corp-sso: unset") || strings.Contains(out.String(), "canary-") {
		t.Errorf("printout: %s", out.String())
	}

	for _, tc := range []struct {
		issuer, ids, want string
	}{
		{"a=https://a.test,b=https://b.test", "a=1", `no client id of issuer "b"`},
		{"a=https://a.test", "a=1,c=3", "does not: c"},
		{"a=https://a.test,https://b.test", "a=1", `"https://b.test" is not name=URL`},
		{"a=https://a.test,b=b.test", "a=1,b=2", "absolute URL"},
		{"a=https://a.test", "1", "is not name=id"},
		{"https://a.test", "a=1", "bare URL"},
		{"a-b=https://a.test,a_b=https://b.test", "a-b=1,a_b=2", "the same name"},
		{"", "a=1", "--oidc-issuer is not"},
	} {
		_, err := parseConfig("serve", nil, envMap(map[string]string{"SWITCHBOARD_OIDC_ISSUER": tc.issuer, "SWITCHBOARD_OIDC_CLIENT_ID": tc.ids}), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q / %q: %v, want an error about %s", tc.issuer, tc.ids, err, tc.want)
		}
	}
}

// admin login-link --operator prints the operator's console sign-in link
// on --public-url: single use, 15 minutes by default, audited; it takes
// no tenant or email, and no lifetime beyond an hour.
func TestAdminOperatorLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, db := migratedDataDir(t)
	var out, errOut bytes.Buffer
	admin := func(args ...string) (string, error) {
		out.Reset()
		errOut.Reset()
		err := run(ctx, append([]string{"admin", "login-link"}, append(args, "--data-dir", dir, "--public-url", "https://sb.example.com")...), envMap(nil), &out, &errOut)
		return strings.TrimSpace(out.String()), err
	}
	for _, bad := range [][]string{{"--operator", "--tenant", "acme"}, {"--operator", "--email", "a@b.c"}, {"--operator", "--lifetime", "2h"}} {
		if _, err := admin(bad...); err == nil {
			t.Errorf("login-link %v worked", bad)
		}
	}
	if n := dbtest.Count(t, db, "operator_sign_in_links", ""); n != 0 {
		t.Fatalf("refused commands stored %d links", n)
	}
	link, err := admin("--operator")
	if err != nil {
		t.Fatalf("login-link --operator: %v\n%s", err, errOut.String())
	}
	u, err := url.Parse(link)
	token := u.Query().Get("token")
	if err != nil || u.Host != "sb.example.com" || u.Path != signin.LinkPath || !members.IsOperatorLink(token) {
		t.Fatalf("login-link --operator printed %q", link)
	}
	if strings.Contains(errOut.String(), token) || !strings.Contains(errOut.String(), "usable once") {
		t.Fatalf("stderr: %s", errOut.String())
	}
	store := members.NewStore(db, discardRecorder{}, members.Options{})
	sess, _, err := store.RedeemOperatorLink(ctx, token)
	if err != nil || !sess.Operator {
		t.Fatalf("redeeming the printed link: %+v, %v", sess, err)
	}
	if _, _, err := store.RedeemOperatorLink(ctx, token); switchboard.CodeOf(err) != "invalid_link" {
		t.Fatalf("the printed link worked twice: %v", err)
	}
	if n := dbtest.Count(t, db, "audit_log", "tenant_id = '' AND actor = $1 AND action = 'operator_link.create'", members.ActorOperator); n != 1 {
		t.Fatalf("%d audit rows of the operator's link, want 1", n)
	}
}
