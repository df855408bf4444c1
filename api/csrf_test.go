package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
)

// TestStateChangingRoutesNeedCSRF sends every state-changing /v1 route of
// the route × role table with an owner's session cookie but without the
// session's CSRF token, and with another session's: each is refused with
// 403 csrf_failed before the route runs, and nothing changes. (The same
// requests with the token are TestRouteRoles' owner column.)
func TestStateChangingRoutesNeedCSRF(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e, creds := roleEnv(t, db)
		session := strings.TrimPrefix(creds[1], sessionCred)
		tables := []string{"tenants", "instances", "secrets", "callers", "api_keys", "members", "member_invitations",
			"member_sessions", "connect_links", "oauth_states", "oauth_providers", "operator_tokens"}
		count := func() map[string]int {
			out := map[string]int{}
			for _, table := range tables {
				out[table] = dbtest.Count(t, db, table, "")
			}
			return out
		}
		before := count()
		checked := 0
		for name, tc := range roleTable {
			if tc.method == http.MethodGet || tc.method == http.MethodHead {
				continue
			}
			checked++
			for _, csrf := range []string{"", members.CSRFToken("sbs_another_session")} {
				r, _ := http.NewRequest(tc.method, e.srv.URL+tc.path, strings.NewReader(tc.body))
				r.AddCookie(&http.Cookie{Name: "sb_session", Value: session})
				r.Header.Set("Content-Type", "application/json")
				if csrf != "" {
					r.Header.Set("X-CSRF-Token", csrf)
				}
				res, err := e.srv.Client().Do(r)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				var problem struct {
					Error struct{ Code string } `json:"error"`
				}
				_ = json.Unmarshal(body, &problem)
				if res.StatusCode != http.StatusForbidden || problem.Error.Code != "csrf_failed" {
					t.Errorf("%s with the cookie and CSRF token %q: %d %s, want 403 csrf_failed", name, csrf, res.StatusCode, body)
				}
			}
		}
		if checked < 15 {
			t.Fatalf("only %d state-changing routes in the table", checked)
		}
		if after := count(); !maps(before, after) {
			t.Errorf("refused requests changed rows: %v -> %v", before, after)
		}
	})
}
