package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestMemberRemovalReachesEveryReplica removes a member through replica
// A's admin API and checks, on replica B within a second, that their
// session, their tenant API key and their per-user OAuth grant no longer
// work, and that the removal is audited with actor and subject.
func TestMemberRemovalReachesEveryReplica(t *testing.T) {
	t.Parallel()
	replicas := dbtest.Replicas(t, 2)
	dbA, dbB := replicas[0], replicas[1]
	o := setupOAuth(t, dbA)
	ctx := context.Background()
	acme, err := o.s.svc.Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	people := members.NewStore(dbA, o.s.audit, members.Options{})
	m, err := people.AddMember(ctx, members.ActorOperator, acme.ID, "ann@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := people.AddMember(ctx, members.ActorOperator, acme.ID, "own@example.com", members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	_, session, err := people.CreateSession(ctx, acme.ID, m.UserID)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := tenants.NewAPIKeys(dbA).Create(ctx, acme.ID, tenants.APIKeyRequest{Name: "ann's bot", Role: switchboard.RoleMember, UserID: m.UserID}, m.UserID)
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := auth.NewOperators(dbA).Create(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	// Ann connects her account through a platform that may assert her.
	platform := o.s.caller(t, "acme", headerPlatform(m.UserID))
	if st, page := o.s.connect(t, o.s.newBrowser(o.as, m.UserID, platform), "acme", "crm"); st != 200 {
		t.Fatalf("connect = %d %s", st, page)
	}

	b := newStack(t, dbB, loadCRM(t), o.clk)
	peopleB := members.NewStore(dbB, b.audit, members.Options{})
	bg, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.oauth.Listen(bg, nil)
	time.Sleep(500 * time.Millisecond) // B's listener connects (and drops its caches) first

	call := func(base, method, path, bearer string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		return res.StatusCode, body
	}
	if st, body := call(b.srv.URL, "GET", "/v1/tenants/acme/instances/crm/grant", key.Reveal()); st != 200 || body["connected"] != true {
		t.Fatalf("B before removal: own grant = %d %v", st, body)
	}
	if _, err := peopleB.ResolveSession(ctx, session.Reveal()); err != nil {
		t.Fatalf("B before removal: session: %v", err)
	}
	if r := b.callTool(t, "acme", "crm", platform, agent, m.UserID, nil, nil); r.isError {
		t.Fatalf("B before removal: call as ann: %+v", r)
	}

	st, removal := call(o.s.srv.URL, "DELETE", "/v1/tenants/acme/members/"+m.UserID, op.Reveal())
	if st != 200 || removal["api_keys_revoked"] != float64(1) || !slices.Equal(anyStrings(removal["grants_revoked"]), []string{"crm"}) {
		t.Fatalf("removal = %d %v", st, removal)
	}
	removed := time.Now()
	if st, body := call(b.srv.URL, "GET", "/v1/tenants/acme/instances", key.Reveal()); st != 401 {
		t.Errorf("B accepts the removed member's API key: %d %v", st, body)
	}
	if _, err := peopleB.ResolveSession(ctx, session.Reveal()); switchboard.CodeOf(err) != "invalid_session" {
		t.Errorf("B accepts the removed member's session: %v", err)
	}
	if n := dbtest.Count(t, dbB, "auth_grants", "user_id = $1", m.UserID); n != 0 {
		t.Errorf("%d grant rows of the removed member remain", n)
	}
	if r := b.callTool(t, "acme", "crm", platform, agent, m.UserID, nil, nil); r.code != "reconnect_required" {
		t.Errorf("B still calls with the removed member's grant: %+v", r)
	}
	if d := time.Since(removed); d > time.Second {
		t.Errorf("removal took %v to reach replica B", d)
	}
	// The removal is in the audit log, with actor and subject.
	var found bool
	for deadline := time.Now().Add(3 * time.Second); !found && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		rows, err := o.s.astore.List(ctx, acme.ID, audit.Query{User: m.UserID})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range rows {
			found = found || (e.Action == "member.remove" && e.Actor == "operator" && e.Subject == m.UserID)
		}
	}
	if !found {
		t.Error("no audit row of the removal")
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestMemberConnectsOwnGrant has a member connect, check and disconnect
// their own grant through the admin API with their own credential (no
// caller, no operator), and be refused another user's.
func TestMemberConnectsOwnGrant(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		o := setupOAuth(t, db)
		ctx := context.Background()
		acme, err := o.s.svc.Tenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		_, key, err := tenants.NewAPIKeys(db).Create(ctx, acme.ID, tenants.APIKeyRequest{Name: "dana", Role: switchboard.RoleMember, UserID: "dana"}, "operator")
		if err != nil {
			t.Fatal(err)
		}
		// Dana's browser: her member credential on Switchboard, her login
		// at the provider.
		b := o.s.newBrowser(o.as, "dana", key.Reveal())
		base := o.s.srv.URL + "/v1/tenants/acme/instances/crm/grant"
		send := func(method, url string) (int, map[string]any) {
			t.Helper()
			req, _ := http.NewRequest(method, url, nil)
			res, err := b.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			var body map[string]any
			_ = json.Unmarshal(raw, &body)
			return res.StatusCode, body
		}
		if st, body := send("GET", base); st != 200 || body["connected"] != false {
			t.Fatalf("status before connecting = %d %v", st, body)
		}
		st, flow := send("POST", base+"/connect")
		if st != 200 || flow["authorize_url"] == nil {
			t.Fatalf("connect = %d %v", st, flow)
		}
		res, err := b.client.Get(flow["authorize_url"].(string))
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(page), "Connected") {
			t.Fatalf("callback = %d %s", res.StatusCode, page)
		}
		if st, body := send("GET", base); st != 200 || body["connected"] != true || body["user"] != "dana" {
			t.Fatalf("status after connecting = %d %v", st, body)
		}
		if st, body := send("GET", base+"?user_id=erin"); st != 403 {
			t.Fatalf("a member reading another user's grant: %d %v", st, body)
		}
		if st, _ := send("DELETE", base); st != 200 {
			t.Fatalf("disconnect = %d", st)
		}
		if st, body := send("GET", base); st != 200 || body["connected"] != false {
			t.Fatalf("status after disconnecting = %d %v", st, body)
		}
	})
}
