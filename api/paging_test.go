package api_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
)

// listCase is one list route: where its rows are in the answer, the
// field that identifies a row, and how many rows the store holds for it.
type listCase struct {
	path, key, id string
	count         string // SQL counting the list's rows
}

// walk follows a list page by page with limit and returns the ids in the
// order the pages gave them.
func (e *env) walk(lc listCase, limit int) []string {
	e.t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			e.t.Fatalf("%s: more than 1000 pages", lc.path)
		}
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		body := e.expect(e.do("GET", lc.path+"?"+q.Encode(), ""), 200).json(e.t)
		rows, _ := body[lc.key].([]any)
		if len(rows) > limit {
			e.t.Fatalf("%s limit %d: a page of %d rows", lc.path, limit, len(rows))
		}
		for _, r := range rows {
			ids = append(ids, fmt.Sprint(r.(map[string]any)[lc.id]))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return ids
		}
		if len(rows) == 0 {
			e.t.Fatalf("%s: an empty page with a next_cursor", lc.path)
		}
		cursor = next
	}
}

// TestListsPageEveryRowOnce is the paging contract of every /v1 list, on
// both stores: rows that share a creation time (and audit rows that share
// a time) are each found exactly once, in one stable order, whatever the
// limit; bad limits and cursors are typed 400s.
func TestListsPageEveryRowOnce(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		for _, slug := range []string{"acme", "other", "t3", "t4"} {
			e.expect(e.do("POST", "/v1/tenants", `{"slug":"`+slug+`","name":"T"}`), 201)
		}
		acme, err := e.server.Tenants().Tenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			e.expect(e.do("PUT", fmt.Sprintf("/v1/tenants/acme/instances/gh%d", i),
				`{"connector_id":"github","auth_mode":"apiKey","fields":{"GITHUB_TOKEN":"t"},"agents":["a"]}`), 201)
			e.expect(e.do("POST", "/v1/tenants/acme/callers", fmt.Sprintf(`{"name":"c%d","kind":"agent-platform"}`, i)), 201)
			e.expect(e.do("POST", "/v1/tenants/other/callers", fmt.Sprintf(`{"name":"c%d","kind":"agent-platform"}`, i)), 201)
			e.createKey("acme", fmt.Sprintf(`{"name":"k%d","role":"admin"}`, i))
			e.expect(e.do("POST", "/v1/tenants/acme/invitations", fmt.Sprintf(`{"email":"inv%d@acme.example","role":"member"}`, i)), 201)
			if _, err := e.server.Members().AddMember(ctx, members.ActorOperator, acme.ID, fmt.Sprintf("m%d@acme.example", i), members.RoleMember); err != nil {
				t.Fatal(err)
			}
			e.expect(e.do("PUT", fmt.Sprintf("/v1/providers/p%d", i), `{"name":"P","authorize_url":"https://id.example.test/authorize","token_url":"https://id.example.test/token","client_id":"cid","client_secret":"s"}`), 201)
			e.expect(e.do("POST", "/v1/operator-tokens", fmt.Sprintf(`{"name":"o%d"}`, i)), 201)
		}
		// Every row of a list made at one instant: the order must still be
		// total (ties broken by id).
		at := time.Now().UTC().Truncate(time.Second)
		for _, table := range []string{"tenants", "instances", "callers", "api_keys", "member_invitations", "members", "oauth_providers", "operator_tokens"} {
			if _, err := db.ExecContext(ctx, `UPDATE `+table+` SET created_at = $1`, at); err != nil {
				t.Fatal(err)
			}
		}
		// Audit rows of one tenant that nothing else writes to, sharing a
		// time; first the row of its creation, which is written
		// asynchronously, must be in.
		quiet, err := e.server.Tenants().Tenant(ctx, "t4")
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM audit_log WHERE tenant_id = $1`, string(quiet.ID)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the creation of tenant t4 was not audited")
			}
		}
		var entries []audit.Entry
		for i := range 7 {
			entries = append(entries, audit.Entry{ID: fmt.Sprintf("aud_same_%d", i), Time: at, Tenant: quiet.ID, Tool: "t", Action: "a", Outcome: "ok"})
		}
		if err := e.server.AuditStore().Insert(ctx, entries); err != nil {
			t.Fatal(err)
		}
		acmeID := "'" + string(acme.ID) + "'"
		lists := []listCase{
			{"/v1/tenants", "tenants", "slug", `SELECT count(*) FROM tenants`},
			{"/v1/tenants/acme/instances", "instances", "slug", `SELECT count(*) FROM instances WHERE tenant_id = ` + acmeID},
			{"/v1/tenants/acme/callers", "callers", "id", `SELECT count(*) FROM callers WHERE tenant_id = ` + acmeID},
			{"/v1/tenants/acme/api-keys", "api_keys", "id", `SELECT count(*) FROM api_keys WHERE tenant_id = ` + acmeID},
			{"/v1/tenants/acme/members", "members", "user_id", `SELECT count(*) FROM members WHERE tenant_id = ` + acmeID},
			{"/v1/tenants/acme/invitations", "invitations", "id", `SELECT count(*) FROM member_invitations WHERE used_at IS NULL AND tenant_id = ` + acmeID},
			{"/v1/providers", "providers", "slug", `SELECT count(*) FROM oauth_providers`},
			{"/v1/operator-tokens", "operator_tokens", "id", `SELECT count(*) FROM operator_tokens`},
			{"/v1/tenants/t4/audit", "entries", "id", `SELECT count(*) FROM audit_log WHERE tenant_id = '` + string(quiet.ID) + `'`},
		}
		for _, lc := range lists {
			var n int
			if err := db.QueryRowContext(ctx, lc.count).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n < 4 {
				t.Fatalf("%s: %d rows in the store, want at least 4", lc.path, n)
			}
			whole := e.walk(lc, switchboard.MaxPageLimit)
			seen := map[string]bool{}
			for _, id := range whole {
				if seen[id] {
					t.Errorf("%s: %s twice", lc.path, id)
				}
				seen[id] = true
			}
			if len(whole) != n {
				t.Errorf("%s: %d rows listed, %d in the store", lc.path, len(whole), n)
			}
			for _, limit := range []int{1, 2} {
				if got := e.walk(lc, limit); fmt.Sprint(got) != fmt.Sprint(whole) {
					t.Errorf("%s with limit %d = %v, want %v", lc.path, limit, got, whole)
				}
			}
			// No limit is a page of at most 50 rows, the whole list here.
			if got := e.expect(e.do("GET", lc.path, ""), 200).json(t); len(got[lc.key].([]any)) != n || got["next_cursor"] != nil {
				t.Errorf("%s without a limit = %v", lc.path, got)
			}
			for _, bad := range []string{"0", "-1", "501", "x", "1.5", ""} {
				if bad == "" {
					continue
				}
				if c := e.expect(e.do("GET", lc.path+"?limit="+bad, ""), 400).errCode(t); c != "invalid_limit" {
					t.Errorf("%s?limit=%s: %s", lc.path, bad, c)
				}
			}
			forged := []string{"abc", "!!!", base64.RawURLEncoding.EncodeToString([]byte(`["x","y"]`)),
				base64.RawURLEncoding.EncodeToString([]byte(`not json`)), switchboard.NextCursor("tenants", "a", "b")}
			for _, cur := range forged {
				if c := e.expect(e.do("GET", lc.path+"?cursor="+url.QueryEscape(cur), ""), 400).errCode(t); c != "invalid_cursor" {
					t.Errorf("%s?cursor=%s: %s", lc.path, cur, c)
				}
			}
		}

		// A cursor of one list, or of one tenant's list, is refused by
		// every other list.
		cursorOf := func(path string) string {
			next, _ := e.expect(e.do("GET", path+"?limit=1", ""), 200).json(t)["next_cursor"].(string)
			if next == "" {
				t.Fatalf("%s?limit=1 has no next_cursor", path)
			}
			return next
		}
		callers := cursorOf("/v1/tenants/acme/callers")
		for _, path := range []string{"/v1/tenants/other/callers", "/v1/tenants/acme/api-keys", "/v1/tenants/acme/invitations",
			"/v1/operator-tokens", "/v1/tenants/acme/audit"} {
			if c := e.expect(e.do("GET", path+"?limit=1&cursor="+url.QueryEscape(callers), ""), 400).errCode(t); c != "invalid_cursor" {
				t.Errorf("acme's callers cursor on %s: %s", path, c)
			}
		}
		audit := cursorOf("/v1/tenants/t4/audit")
		if c := e.expect(e.do("GET", "/v1/tenants/acme/audit?limit=1&cursor="+url.QueryEscape(audit), ""), 400).errCode(t); c != "invalid_cursor" {
			t.Errorf("t4's audit cursor on acme's audit: %s", c)
		}
		tenants := cursorOf("/v1/tenants")
		if c := e.expect(e.do("GET", "/v1/providers?cursor="+url.QueryEscape(tenants), ""), 400).errCode(t); c != "invalid_cursor" {
			t.Errorf("the tenants cursor on providers: %s", c)
		}
	})
}
