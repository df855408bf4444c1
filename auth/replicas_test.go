package auth_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenants"
)

const crmSecret = "crm-app-secret-canary"

// userFields are the fields of an oauth instance whose client "crm-app"
// is registered at as.
func userFields(as *authztest.Server) map[string]string {
	return map[string]string{auth.FieldClientID: "crm-app", auth.FieldClientSecret: crmSecret,
		auth.FieldAuthorizeURL: as.AuthorizeURL(), auth.FieldTokenURL: as.TokenURL()}
}

// registerCRM registers the oauth instance's client at as.
func (r *rig) registerCRM() {
	r.as.AddClient(authztest.Client{ID: "crm-app", Secret: crmSecret,
		RedirectURIs: []string{r.o.RedirectURI(registry.ModeOAuth, "acme", "crm")}})
}

// connect runs user's consent flow on this replica: Connect, the
// authorization server's consent, and the callback's ConsumeState and
// Finish.
func (r *rig) connect(t *testing.T, user string) {
	t.Helper()
	r.connectWith(t, r.input(registry.ModeOAuth, userFields(r.as), user), user)
}

// connectWith is connect for the instance as in describes it.
func (r *rig) connectWith(t *testing.T, in auth.ModeInput, user string) {
	t.Helper()
	ctx := context.Background()
	flow, err := r.o.Connect(ctx, in)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	req, _ := http.NewRequest("GET", flow.AuthorizeURL, nil)
	req.Header.Set(authztest.LoginHeader, user)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize = %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	fs, err := r.o.ConsumeState(ctx, loc.Query().Get("state"), flow.Binding, auth.Callback{TenantSlug: "acme", InstanceSlug: "crm"})
	if err != nil {
		t.Fatalf("ConsumeState: %v", err)
	}
	if err := r.o.Finish(ctx, fs, in, loc.Query().Get("code")); err != nil {
		t.Fatalf("Finish: %v", err)
	}
}

// twoReplicas is two replicas' token machinery on one Postgres database,
// sharing a clock, each listening for the other's announcements.
func twoReplicas(t *testing.T, as *authztest.Server) (*rig, *rig) {
	t.Helper()
	dbs := dbtest.Replicas(t, 2)
	tn, err := tenants.NewStore(dbs[0], newSecrets(t, dbs[0])).CreateTenant(context.Background(), "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	clk := &testClock{}
	a, b := replica(t, dbs[0], as, tn, clk), replica(t, dbs[1], as, tn, clk)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go a.o.Listen(ctx, nil)
	go b.o.Listen(ctx, nil)
	return a, b
}

// TestReconnectReachesOtherReplicas: after a user reconnects on one
// replica, another that had seen the grant revoked serves the new grant
// at once, not reconnect_required for another 10 s (issue 10 §3).
func TestReconnectReachesOtherReplicas(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{})
	a, b := twoReplicas(t, as)
	a.registerCRM()
	a.connect(t, "alice")
	in := b.input(registry.ModeOAuth, userFields(as), "alice")
	if sub, err := b.call(t, in); err != nil || sub != "alice" {
		t.Fatalf("call on b = %q, %v", sub, err)
	}
	// The provider revokes alice's grant; b finds out at its next refresh.
	as.RevokeSubject("alice")
	b.clk.advance(2 * time.Hour)
	if _, err := b.call(t, in); switchboard.CodeOf(err) != auth.StatusReconnectRequired {
		t.Fatalf("call on b after the revocation = %v, want reconnect_required", err)
	}
	a.connect(t, "alice")
	start := time.Now()
	for {
		_, err := b.call(t, in)
		if err == nil {
			break
		}
		if time.Since(start) > 3*time.Second {
			t.Fatalf("b still answers %v %s after alice reconnected on a", err, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
