package api_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/api"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
)

// roleNames are the columns of the route × role table, and last the
// operator's console session (an operator sign-in link), which gets
// exactly what the operator token gets (want[0]) on every route.
var roleNames = []string{"operator", "owner", "admin", "member", "other tenant's owner", "other tenant's admin", "none", "operator session"}

// wantFor is the status role i gets for tc.
func wantFor(tc roleCase, i int) int {
	if i == len(tc.want) {
		return tc.want[0]
	}
	return tc.want[i]
}

// roleCase is one /v1 route with a fixed request and the exact status
// each role gets: operator, acme's owner (a session cookie), acme's admin
// key, acme's member key (acting as usr_mem), the other tenant's owner (a
// session cookie) and admin key, no credential.
type roleCase struct {
	method, path, body string
	want               [7]int
}

// roleTable has an entry for every registered /v1 route (keyed by
// method and echo path); TestRouteRoles fails for a route without one.
var roleTable = map[string]roleCase{
	"POST /v1/tenants":                                           {"POST", "/v1/tenants", `{}`, [7]int{400, 403, 403, 403, 403, 403, 401}},
	"GET /v1/tenants":                                            {"GET", "/v1/tenants", ``, [7]int{200, 403, 403, 403, 403, 403, 401}},
	"GET /v1/tenants/:tenant":                                    {"GET", "/v1/tenants/acme", ``, [7]int{200, 200, 200, 200, 404, 404, 401}},
	"PATCH /v1/tenants/:tenant":                                  {"PATCH", "/v1/tenants/acme", `{}`, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"GET /v1/connectors":                                         {"GET", "/v1/connectors", ``, [7]int{200, 200, 200, 200, 200, 200, 401}},
	"GET /v1/connectors/:connector":                              {"GET", "/v1/connectors/github", ``, [7]int{200, 200, 200, 200, 200, 200, 401}},
	"GET /v1/connectors/:connector/icons/:size":                  {"GET", "/v1/connectors/github/icons/small", ``, [7]int{200, 200, 200, 200, 200, 200, 401}},
	"PUT /v1/tenants/:tenant/instances/:instance":                {"PUT", "/v1/tenants/acme/instances/gh", `{}`, [7]int{400, 400, 400, 403, 404, 404, 401}},
	"PATCH /v1/tenants/:tenant/instances/:instance":              {"PATCH", "/v1/tenants/acme/instances/gh", `{"agents":["agent-1"]}`, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/instances":                          {"GET", "/v1/tenants/acme/instances", ``, [7]int{200, 200, 200, 200, 404, 404, 401}},
	"GET /v1/tenants/:tenant/instances/:instance":                {"GET", "/v1/tenants/acme/instances/gh", ``, [7]int{200, 200, 200, 200, 404, 404, 401}},
	"DELETE /v1/tenants/:tenant/instances/:instance":             {"DELETE", "/v1/tenants/acme/instances/nope", ``, [7]int{404, 404, 404, 403, 404, 404, 401}},
	"POST /v1/tenants/:tenant/instances/:instance/test":          {"POST", "/v1/tenants/acme/instances/nope/test", ``, [7]int{404, 404, 404, 403, 404, 404, 401}},
	"POST /v1/tenants/:tenant/instances/:instance/connect-links": {"POST", "/v1/tenants/acme/instances/gh/connect-links", `{}`, [7]int{400, 400, 400, 400, 404, 404, 401}},
	"GET /v1/tenants/:tenant/instances/:instance/grant":          {"GET", "/v1/tenants/acme/instances/gh/grant", ``, [7]int{400, 400, 400, 400, 404, 404, 401}},
	"POST /v1/tenants/:tenant/instances/:instance/grant/connect": {"POST", "/v1/tenants/acme/instances/gh/grant/connect", ``, [7]int{400, 400, 400, 400, 404, 404, 401}},
	"DELETE /v1/tenants/:tenant/instances/:instance/grant":       {"DELETE", "/v1/tenants/acme/instances/gh/grant", ``, [7]int{400, 400, 400, 400, 404, 404, 401}},
	"GET /v1/tenants/:tenant/instances/:instance/settings":       {"GET", "/v1/tenants/acme/instances/gh/settings", ``, [7]int{400, 400, 400, 400, 404, 404, 401}},
	"PUT /v1/tenants/:tenant/instances/:instance/settings":       {"PUT", "/v1/tenants/acme/instances/gh/settings", `{}`, [7]int{400, 400, 400, 400, 404, 404, 401}},
	"DELETE /v1/tenants/:tenant/instances/:instance/settings":    {"DELETE", "/v1/tenants/acme/instances/gh/settings", ``, [7]int{400, 400, 400, 400, 404, 404, 401}},
	"POST /v1/tenants/:tenant/callers":                           {"POST", "/v1/tenants/acme/callers", `{}`, [7]int{400, 400, 400, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/callers":                            {"GET", "/v1/tenants/acme/callers", ``, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"DELETE /v1/tenants/:tenant/callers/:caller":                 {"DELETE", "/v1/tenants/acme/callers/cal_nope", ``, [7]int{404, 404, 404, 403, 404, 404, 401}},
	"POST /v1/tenants/:tenant/api-keys":                          {"POST", "/v1/tenants/acme/api-keys", `{}`, [7]int{400, 400, 400, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/api-keys":                           {"GET", "/v1/tenants/acme/api-keys", ``, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"DELETE /v1/tenants/:tenant/api-keys/:key":                   {"DELETE", "/v1/tenants/acme/api-keys/key_nope", ``, [7]int{404, 404, 404, 403, 404, 404, 401}},
	"POST /v1/tenants/:tenant/invitations":                       {"POST", "/v1/tenants/acme/invitations", `{}`, [7]int{400, 400, 400, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/invitations":                        {"GET", "/v1/tenants/acme/invitations", ``, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/members":                            {"GET", "/v1/tenants/acme/members", ``, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"PATCH /v1/tenants/:tenant/members/:user":                    {"PATCH", "/v1/tenants/acme/members/usr_nope", `{"role":"admin"}`, [7]int{404, 404, 403, 403, 404, 404, 401}},
	"DELETE /v1/tenants/:tenant/members/:user":                   {"DELETE", "/v1/tenants/acme/members/usr_nope", ``, [7]int{404, 404, 403, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/audit":                              {"GET", "/v1/tenants/acme/audit", ``, [7]int{200, 200, 200, 200, 404, 404, 401}},
	"GET /v1/tenants/:tenant/audit/export":                       {"GET", "/v1/tenants/acme/audit/export", ``, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/audit/retention":                    {"GET", "/v1/tenants/acme/audit/retention", ``, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"PUT /v1/tenants/:tenant/audit/retention":                    {"PUT", "/v1/tenants/acme/audit/retention", `{"days":0}`, [7]int{200, 200, 403, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/limits":                             {"GET", "/v1/tenants/acme/limits", ``, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"PUT /v1/tenants/:tenant/limits":                             {"PUT", "/v1/tenants/acme/limits", `{}`, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"GET /v1/tenants/:tenant/usage":                              {"GET", "/v1/tenants/acme/usage", ``, [7]int{200, 200, 200, 403, 404, 404, 401}},
	"GET /v1/usage":                                              {"GET", "/v1/usage", ``, [7]int{200, 403, 403, 403, 403, 403, 401}},
	"PUT /v1/providers/:provider":                                {"PUT", "/v1/providers/nope", `{}`, [7]int{400, 403, 403, 403, 403, 403, 401}},
	"GET /v1/providers":                                          {"GET", "/v1/providers", ``, [7]int{200, 403, 403, 403, 403, 403, 401}},
	"GET /v1/providers/:provider":                                {"GET", "/v1/providers/nope", ``, [7]int{404, 403, 403, 403, 403, 403, 401}},
	"DELETE /v1/providers/:provider":                             {"DELETE", "/v1/providers/nope", ``, [7]int{404, 403, 403, 403, 403, 403, 401}},
	"POST /v1/operator-tokens":                                   {"POST", "/v1/operator-tokens", `{}`, [7]int{400, 403, 403, 403, 403, 403, 401}},
	"GET /v1/operator-tokens":                                    {"GET", "/v1/operator-tokens", ``, [7]int{200, 403, 403, 403, 403, 403, 401}},
	"DELETE /v1/operator-tokens/:token":                          {"DELETE", "/v1/operator-tokens/opt_nope", ``, [7]int{404, 403, 403, 403, 403, 403, 401}},
	"POST /v1/operator-sign-in-links":                            {"POST", "/v1/operator-sign-in-links", ``, [7]int{201, 403, 403, 403, 403, 403, 401}},
}

// createKey creates a tenant API key with the operator token and returns
// the key.
func (e *env) createKey(tenant, body string) string {
	e.t.Helper()
	k := e.expect(e.do("POST", "/v1/tenants/"+tenant+"/api-keys", body), 201).json(e.t)
	key, _ := k["key"].(string)
	if !strings.HasPrefix(key, "sbk_") {
		e.t.Fatalf("created key = %v", k)
	}
	return key
}

// roleEnv is a server with two tenants, an instance of acme, and a
// credential per role.
func roleEnv(t *testing.T, db *database.DB) (*env, []string) {
	e := newEnv(t, db)
	e.expect(e.do("POST", "/v1/tenants", `{"slug":"acme","name":"Acme"}`), 201)
	e.expect(e.do("POST", "/v1/tenants", `{"slug":"other","name":"Other"}`), 201)
	e.expect(e.do("PUT", "/v1/tenants/acme/instances/gh",
		`{"connector_id":"github","auth_mode":"apiKey","fields":{"GITHUB_TOKEN":"`+canary+`"},"agents":["agent-1"]}`), 201)
	creds := []string{
		e.token,
		e.ownerSession("acme"),
		e.createKey("acme", `{"name":"terraform","role":"admin"}`),
		e.createKey("acme", `{"name":"mine","role":"member","user_id":"usr_mem"}`),
		e.ownerSession("other"),
		e.createKey("other", `{"name":"theirs","role":"admin"}`),
		"",
		e.operatorSession(),
	}
	return e, creds
}

// operatorSession signs the operator in with an operator sign-in link and
// returns the session as a credential for req.
func (e *env) operatorSession() string {
	e.t.Helper()
	ctx := context.Background()
	_, link, err := e.server.Members().CreateOperatorLink(ctx, members.ActorOperator, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	_, token, err := e.server.Members().RedeemOperatorLink(ctx, link.Reveal())
	if err != nil {
		e.t.Fatal(err)
	}
	return sessionCred + token.Reveal()
}

// ownerSession adds an owner to tenant, signs them in, and returns the
// session as a credential for req ("session:" and the cookie's token).
func (e *env) ownerSession(tenant string) string {
	e.t.Helper()
	ctx := context.Background()
	t, err := e.server.Tenants().Tenant(ctx, tenant)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := e.server.Members().AddMember(ctx, members.ActorOperator, t.ID, "owner@"+tenant+".example", members.RoleOwner)
	if err != nil {
		e.t.Fatal(err)
	}
	_, token, err := e.server.Members().CreateSession(ctx, t.ID, m.UserID)
	if err != nil {
		e.t.Fatal(err)
	}
	return sessionCred + token.Reveal()
}

// TestRouteRoles calls every /v1 route with every role and checks the
// exact status; a route registered without an entry in roleTable fails.
// Another tenant's credential gets 404 tenant_not_found on a tenant's
// routes, exactly as for a tenant that does not exist.
func TestRouteRoles(t *testing.T) {
	t.Parallel()
	param := regexp.MustCompile(`:([A-Za-z0-9_]+)`)
	seen := 0
	for _, r := range api.New(api.Config{}).Router().Routes() {
		if !strings.HasPrefix(r.Path, "/v1/") {
			continue
		}
		seen++
		if _, ok := roleTable[r.Method+" "+r.Path]; !ok {
			t.Errorf("route %s %s has no entry in the route × role table", r.Method, param.ReplaceAllString(r.Path, "{$1}"))
		}
	}
	if seen != len(roleTable) {
		t.Errorf("%d /v1 routes registered, %d in the table", seen, len(roleTable))
	}
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e, creds := roleEnv(t, db)
		for name, tc := range roleTable {
			for i, cred := range creds {
				var body io.Reader
				ct := ""
				if tc.body != "" {
					body, ct = strings.NewReader(tc.body), "application/json"
				}
				res := e.req(tc.method, tc.path, cred, ct, body)
				if want := wantFor(tc, i); res.status != want {
					t.Errorf("%s as %s: %d, want %d: %s", name, roleNames[i], res.status, want, res.body)
					continue
				}
				if res.status >= 400 {
					code := res.errCode(t)
					switch {
					case res.status == http.StatusForbidden && code != "role_required":
						t.Errorf("%s as %s: 403 %s, want role_required", name, roleNames[i], code)
					case strings.HasPrefix(roleNames[i], "other tenant") && strings.HasPrefix(name, "GET /v1/tenants/:tenant") && code != "tenant_not_found":
						t.Errorf("%s as %s: %s, want tenant_not_found", name, roleNames[i], code)
					}
				}
			}
		}
		e.assertNoCanary(canary)
	})
}

// TestTenantPrincipals checks what each role sees through the routes it
// may use: a member gets instances without their configuration and only
// their own audit rows; API keys are shown once, listed without the key,
// scoped to their tenant, and refused from the request after revocation.
func TestTenantPrincipals(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e, creds := roleEnv(t, db)
		op, admin, member, other := creds[0], creds[2], creds[3], creds[5]
		get := func(path, cred string, want int) response {
			t.Helper()
			return e.expect(e.req("GET", path, cred, "", nil), want)
		}

		// A member's view of an instance: no fields, allowlist or
		// verification; an admin's has them.
		for _, path := range []string{"/v1/tenants/acme/instances/gh", "/v1/tenants/acme/instances"} {
			b := string(get(path, member, 200).body)
			for _, hidden := range []string{`"fields"`, `"agents"`, `"verification"`, "agent-1", "GITHUB_TOKEN"} {
				if strings.Contains(b, hidden) {
					t.Errorf("member view of %s shows %s: %s", path, hidden, b)
				}
			}
			if !strings.Contains(b, `"slug":"gh"`) || !strings.Contains(b, `"auth_mode":"apiKey"`) {
				t.Errorf("member view of %s: %s", path, b)
			}
			if b := string(get(path, admin, 200).body); !strings.Contains(b, `"fields"`) || !strings.Contains(b, "agent-1") {
				t.Errorf("admin view of %s lacks the configuration: %s", path, b)
			}
		}

		// Audit rows: a member sees their own, never anyone else's.
		acme := get("/v1/tenants/acme", op, 200).json(t)["id"].(string)
		if err := audit.NewStore(db).Insert(context.Background(), []audit.Entry{
			{Tenant: switchboard.TenantID(acme), Instance: "gh", Actor: "usr_mem", Subject: "usr_mem", Outcome: "ok"},
			{Tenant: switchboard.TenantID(acme), Instance: "gh", Actor: "svc", Subject: "usr_else", Outcome: "ok"},
		}); err != nil {
			t.Fatal(err)
		}
		count := func(path, cred string) int {
			t.Helper()
			return len(get(path, cred, 200).json(t)["entries"].([]any))
		}
		if n := count("/v1/tenants/acme/audit", member); n != 1 {
			t.Errorf("member sees %d audit rows, want their 1", n)
		}
		if n := count("/v1/tenants/acme/audit?instance=gh", admin); n != 2 {
			t.Errorf("admin sees %d audit rows, want 2", n)
		}
		if n := count("/v1/tenants/acme/audit?user_id=usr_else", admin); n != 1 {
			t.Errorf("admin filtering by user sees %d rows, want 1", n)
		}
		if c := get("/v1/tenants/acme/audit?user_id=usr_else", member, 403).errCode(t); c != "role_required" {
			t.Errorf("member asking for another user's rows: %s", c)
		}
		// Paging: one row a page, by the opaque cursor, reaches both rows
		// once; a cursor the server did not give out is a typed 400.
		first := get("/v1/tenants/acme/audit?instance=gh&limit=1", admin, 200).json(t)
		next, _ := first["next_cursor"].(string)
		if len(first["entries"].([]any)) != 1 || next == "" {
			t.Fatalf("first page: %v", first)
		}
		second := get("/v1/tenants/acme/audit?instance=gh&limit=1&cursor="+url.QueryEscape(next), admin, 200).json(t)
		if len(second["entries"].([]any)) != 1 || second["next_cursor"] != nil || second["prev_cursor"] == nil ||
			second["entries"].([]any)[0].(map[string]any)["id"] == first["entries"].([]any)[0].(map[string]any)["id"] {
			t.Errorf("second page: %v", second)
		}
		if c := get("/v1/tenants/acme/audit?cursor=bm90LWEtY3Vyc29y", admin, 400).errCode(t); c != "invalid_cursor" {
			t.Errorf("forged cursor: %s", c)
		}
		if c := get("/v1/tenants/acme/instances/gh/grant?user_id=usr_else", member, 403).errCode(t); c != "role_required" {
			t.Errorf("member asking for another user's grant: %s", c)
		}

		// API keys: an admin key creates one (created_by names it); the
		// list never shows a key; other tenants cannot touch it.
		k := e.expect(e.req("POST", "/v1/tenants/acme/api-keys", admin, "application/json",
			strings.NewReader(`{"name":"ci","role":"member","user_id":"usr_ci"}`)), 201)
		if k.header.Get("Cache-Control") != "no-store" {
			t.Error("a created key may be cached")
		}
		created := k.json(t)
		ciKey, ciID := created["key"].(string), created["id"].(string)
		if !strings.HasPrefix(created["created_by"].(string), "key:key_") {
			t.Errorf("created_by = %v", created["created_by"])
		}
		if c := e.expect(e.req("POST", "/v1/tenants/acme/api-keys", admin, "application/json",
			strings.NewReader(`{"name":"boss","role":"owner"}`)), 400).errCode(t); c != "invalid_role" {
			t.Errorf("owner key: %s", c)
		}
		list := string(get("/v1/tenants/acme/api-keys", admin, 200).body)
		if strings.Contains(list, ciKey) || strings.Contains(list, `"key":`) || !strings.Contains(list, `"last_used_at"`) {
			t.Errorf("key list: %s", list)
		}
		if c := e.expect(e.req("DELETE", "/v1/tenants/other/api-keys/"+ciID, other, "", nil), 404).errCode(t); c != "api_key_not_found" {
			t.Errorf("revoking another tenant's key: %s", c)
		}
		get("/v1/tenants/acme/instances", ciKey, 200)
		if r := e.expect(e.req("DELETE", "/v1/tenants/acme/api-keys/"+ciID, admin, "", nil), 200).json(t); r["revoked_at"] == nil {
			t.Errorf("revoked key = %v", r)
		}
		if c := get("/v1/tenants/acme/instances", ciKey, 401).errCode(t); c != "unauthorized" {
			t.Errorf("revoked key: %s", c)
		}
		// Creation and revocation are audited with actor and subject.
		want := map[string]bool{"api_key.create:member": false, "api_key.revoke": false}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			for _, row := range get("/v1/tenants/acme/audit?limit=500", op, 200).json(t)["entries"].([]any) {
				r := row.(map[string]any)
				if _, ok := want[r["action"].(string)]; ok && r["subject"] == ciID && r["actor"] == created["created_by"] {
					want[r["action"].(string)] = true
				}
			}
			if want["api_key.create:member"] && want["api_key.revoke"] {
				break
			}
		}
		for action, seen := range want {
			if !seen {
				t.Errorf("no audit row %s of the key by its creator", action)
			}
		}
		e.assertNoCanary(canary)
		// The keys appear in their creation response only, never in logs.
		for _, key := range []string{ciKey, admin, member, other, op} {
			if strings.Contains(e.logs.String(), key) {
				t.Errorf("the logs hold a credential")
			}
		}
	})
}

// TestMemberRoutes changes a member's role and removes members through
// the API: the last owner is kept, a bad role or grants option is refused,
// and a removed member's keys are revoked.
func TestMemberRoutes(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		e, creds := roleEnv(t, db)
		ctx := context.Background()
		acme, err := e.server.Tenants().Tenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		owner, err := e.server.Members().AddMember(ctx, members.ActorOperator, acme.ID, "own@example.com", members.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		ann, err := e.server.Members().AddMember(ctx, members.ActorOperator, acme.ID, "ann@example.com", members.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		annKey := e.createKey("acme", `{"name":"ann","role":"member","user_id":"`+ann.UserID+`"}`)
		if l := e.expect(e.req("GET", "/v1/tenants/acme/members", creds[2], "", nil), 200).json(t)["members"].([]any); len(l) != 3 {
			t.Fatalf("members = %v", l)
		}
		// Admins invite, but only owners (and the operator) invite owners.
		invite := func(cred, role string, want int) response {
			t.Helper()
			return e.expect(e.req("POST", "/v1/tenants/acme/invitations", cred, "application/json",
				strings.NewReader(`{"email":"new-`+role+`@example.com","role":"`+role+`"}`)), want)
		}
		if c := invite(creds[2], "owner", 403).errCode(t); c != "role_required" {
			t.Errorf("admin inviting an owner: %s", c)
		}
		invite(creds[2], "admin", 201)
		invite(creds[1], "owner", 201)
		// The owner signed in with a cookie changes a role; then, of two
		// owners, one may be demoted and the last may not.
		if r := e.expect(e.req("PATCH", "/v1/tenants/acme/members/"+ann.UserID, creds[1], "application/json",
			strings.NewReader(`{"role":"member"}`)), 200).json(t); r["role"] != "member" {
			t.Errorf("owner's role change = %v", r)
		}
		e.expect(e.do("PATCH", "/v1/tenants/acme/members/"+owner.UserID, `{"role":"member"}`), 200)
		var sessionOwner string
		for _, m := range e.expect(e.do("GET", "/v1/tenants/acme/members", ""), 200).json(t)["members"].([]any) {
			if m := m.(map[string]any); m["email"] == "owner@acme.example" {
				sessionOwner = m["user_id"].(string)
			}
		}
		if c := e.expect(e.do("PATCH", "/v1/tenants/acme/members/"+sessionOwner, `{"role":"admin"}`), 409).errCode(t); c != "last_owner" {
			t.Errorf("demoting the last owner: %s", c)
		}
		if c := e.expect(e.do("PATCH", "/v1/tenants/acme/members/"+ann.UserID, `{"role":"boss"}`), 400).errCode(t); c != "invalid_role" {
			t.Errorf("bad role: %s", c)
		}
		if r := e.expect(e.do("PATCH", "/v1/tenants/acme/members/"+ann.UserID, `{"role":"admin"}`), 200).json(t); r["role"] != "admin" {
			t.Errorf("role change = %v", r)
		}
		if c := e.expect(e.do("DELETE", "/v1/tenants/acme/members/"+ann.UserID+"?grants=maybe", ""), 400).errCode(t); c != "invalid_grants" {
			t.Errorf("bad grants option: %s", c)
		}
		e.expect(e.req("GET", "/v1/tenants/acme/instances", annKey, "", nil), 200)
		r := e.expect(e.do("DELETE", "/v1/tenants/acme/members/"+ann.UserID+"?grants=keep", ""), 200).json(t)
		if r["api_keys_revoked"] != float64(1) || len(r["grants_revoked"].([]any)) != 0 {
			t.Errorf("removal = %v", r)
		}
		e.expect(e.req("GET", "/v1/tenants/acme/instances", annKey, "", nil), 401)
		if c := e.expect(e.do("DELETE", "/v1/tenants/acme/members/"+sessionOwner, ""), 409).errCode(t); c != "last_owner" {
			t.Errorf("removing the last owner: %s", c)
		}
	})
}
