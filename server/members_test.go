package server_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// A member removed on replica A is, within a second, a user that callers
// on replica B may no longer name (user_not_found), although B had just
// cached them as a member; on A it is at once.
func TestMemberRemovalReachesCallersOnEveryReplica(t *testing.T) {
	t.Parallel()
	dbs := dbtest.Replicas(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := servertest.Start(t, server.Config{DB: dbs[0]})
	b := servertest.Start(t, server.Config{DB: dbs[1]})
	a.Listen(ctx)
	b.Listen(ctx)
	tn, err := a.Tenants().CreateTenant(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Members().AddMember(ctx, members.ActorOperator, tn.ID, "own@example.com", members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	ann, err := a.Members().AddMember(ctx, members.ActorOperator, tn.ID, "ann@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := a.Tenants().CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform",
		Kind: tenants.KindAgentPlatform, Trusted: true, UserMode: tenants.UserHeader})
	if err != nil {
		t.Fatal(err)
	}
	// naming returns the error code of a call on s by the platform naming
	// ann, empty when it is accepted.
	naming := func(s *servertest.Server) string {
		req := httptest.NewRequest("POST", "/workspaces/acme/mcp/crm", nil)
		req.Header.Set("Authorization", "Bearer "+token.Reveal())
		req.Header.Set("X-User-Id", ann.UserID)
		_, err := s.Gateway().Authenticate(ctx, req, "acme")
		if err == nil {
			return ""
		}
		return switchboard.CodeOf(err)
	}
	time.Sleep(500 * time.Millisecond) // the listeners connect (and drop their caches) first
	for name, s := range map[string]*servertest.Server{"A": a, "B": b} {
		if code := naming(s); code != "" {
			t.Fatalf("%s before removal: %q", name, code)
		}
	}

	if err := a.Members().RemoveMember(ctx, members.ActorOperator, tn.ID, ann.UserID); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	if code := naming(a); code != "user_not_found" {
		t.Errorf("A right after the removal: %q, want user_not_found", code)
	}
	code := naming(b)
	for code != "user_not_found" && time.Since(removed) < 2*time.Second {
		time.Sleep(10 * time.Millisecond)
		code = naming(b)
	}
	if d := time.Since(removed); code != "user_not_found" || d > time.Second {
		t.Errorf("B named the removed member for %v (last answer %q); want user_not_found within 1s", d, code)
	}
}
