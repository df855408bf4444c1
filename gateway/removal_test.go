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

// TestMemberRemovalRevokesAtTheProvider removes members whose grants
// were connected through a real authorization code flow at the fosite
// server, whose connector declares its revocation endpoint: the default
// removal revokes exactly the member's one token family (one request,
// for that member's token) and deletes their grant rows; a removal with
// ?grants=keep asks the provider nothing and keeps the grant; a provider
// whose revocation fails does not block the removal, which deletes the
// grant, logs the failure without the token and audits it.
func TestMemberRemovalRevokesAtTheProvider(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		o := setupOAuth(t, db)
		ctx := context.Background()
		acme, err := o.s.svc.Tenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		people := o.s.members
		if _, err := people.AddMember(ctx, members.ActorOperator, acme.ID, "own@example.com", members.RoleOwner); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, email := range []string{"ann@example.com", "bea@example.com", "cid@example.com"} {
			m, err := people.AddMember(ctx, members.ActorOperator, acme.ID, email, members.RoleMember)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.UserID)
		}
		ann, bea, cid := ids[0], ids[1], ids[2]
		platform := o.s.caller(t, "acme", headerPlatform(ids...))
		for _, id := range ids {
			if st, page := o.s.connect(t, o.s.newBrowser(o.as, id, platform), "acme", "crm"); st != 200 || !strings.Contains(page, "Connected") {
				t.Fatalf("connect %s = %d %s", id, st, page)
			}
		}
		op, _, err := auth.NewOperators(db).Create(ctx, "test")
		if err != nil {
			t.Fatal(err)
		}
		remove := func(user, query string) map[string]any {
			t.Helper()
			req, _ := http.NewRequest("DELETE", o.s.srv.URL+"/v1/tenants/acme/members/"+user+query, nil)
			req.Header.Set("Authorization", "Bearer "+op.Reveal())
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body map[string]any
			raw, _ := io.ReadAll(res.Body)
			_ = json.Unmarshal(raw, &body)
			if res.StatusCode != 200 {
				t.Fatalf("removing %s%s = %d %s", user, query, res.StatusCode, raw)
			}
			return body
		}
		grants := func(user string) int { return dbtest.Count(t, db, "auth_grants", "user_id = $1", user) }
		if len(o.as.Revocations()) != 0 || grants(ann) == 0 {
			t.Fatalf("before removal: revocations %v, ann's grant rows %d", o.as.Revocations(), grants(ann))
		}

		// The default: the member's grant is revoked at the provider and deleted.
		out := remove(ann, "")
		if !slices.Equal(anyStrings(out["grants_revoked"]), []string{"crm"}) || out["revocations_failed"] != nil {
			t.Fatalf("removal of ann = %v", out)
		}
		revs := o.as.Revocations()
		if len(revs) != 1 || revs[0].Subject != ann || revs[0].Hint != "refresh_token" || revs[0].Status != 200 {
			t.Fatalf("revocations at the provider after removing ann = %+v; want one refresh_token revocation of ann's", revs)
		}
		if n := grants(ann); n != 0 {
			t.Errorf("%d grant rows of ann remain", n)
		}
		// The revoked token family is dead at the provider: the call
		// cannot go on with ann's grant (her membership is gone too).
		if r := o.s.callTool(t, "acme", "crm", platform, agent, ann, nil, nil); !r.isError {
			t.Errorf("a call as removed ann succeeded: %+v", r)
		}

		// Grants kept: the provider is asked nothing, the grant stays.
		out = remove(bea, "?grants=keep")
		if len(anyStrings(out["grants_revoked"])) != 0 {
			t.Fatalf("removal of bea with grants kept = %v", out)
		}
		if n := len(o.as.Revocations()); n != 1 {
			t.Fatalf("removal with grants kept called the revocation endpoint: %+v", o.as.Revocations())
		}
		if n := grants(bea); n == 0 {
			t.Error("removal with grants kept deleted bea's grant")
		}

		// A failing revocation endpoint does not block the removal.
		o.as.FailRevocations(true)
		out = remove(cid, "")
		failed, _ := out["revocations_failed"].(map[string]any)
		if !slices.Equal(anyStrings(out["grants_revoked"]), []string{"crm"}) || failed["crm"] != "unexpected_response" {
			t.Fatalf("removal of cid with a failing provider = %v", out)
		}
		if revs := o.as.Revocations(); len(revs) != 2 || revs[1].Subject != cid || revs[1].Status != 503 {
			t.Fatalf("revocations after removing cid = %+v", revs)
		}
		if n := grants(cid); n != 0 {
			t.Errorf("%d grant rows of cid remain after a failed revocation", n)
		}
		if !strings.Contains(o.s.logs.String(), "revoking at the provider failed") {
			t.Error("the failed revocation is not logged")
		}
		for _, tok := range o.as.Issued() {
			if strings.Contains(o.s.logs.String(), tok) {
				t.Fatal("a token is in the logs")
			}
		}
		var audited bool
		for deadline := time.Now().Add(3 * time.Second); !audited && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			rows, err := o.s.astore.List(ctx, acme.ID, audit.Query{User: cid})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range rows {
				audited = audited || (e.Action == "grant.revoke" && e.Outcome == "unexpected_response" && e.Subject == cid && e.Instance == "crm" && e.Actor == "operator")
			}
		}
		if !audited {
			t.Error("no audit row of the failed revocation")
		}
	})
}
