package main

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
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
	dir := t.TempDir()
	ctx := context.Background()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"migrate", "--data-dir", dir}, envMap(nil), &out, &errOut); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut.String())
	}
	db := openDataDir(t, dir)
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
	if n := dbtest.Count(t, db, "audit_log", "tenant_id = $1 AND actor = $2 AND action IN ('invitation.create:owner', 'login_link.create')",
		string(tn.ID), members.ActorOperator); n != 2 {
		t.Fatalf("%d audit rows of the operator's links, want 2", n)
	}
}

// discardRecorder drops audit entries (the test reads the command's rows).
type discardRecorder struct{}

func (discardRecorder) Admit() (func(audit.Entry), error) { return func(audit.Entry) {}, nil }
func (discardRecorder) Record(audit.Entry)                {}

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
	if is := c.oidcIssuers(); len(is) != 1 || is[0].Issuer != "https://idp.example.test" || is[0].ClientID != "sb" {
		t.Fatalf("issuers %+v", is)
	}
}
