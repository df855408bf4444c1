package api_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/api"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// roleNames are the columns of the route × role table.
var roleNames = []string{"operator", "admin", "member", "other tenant", "none"}

// roleCase is one /v1 route with a fixed request and the exact status
// each role gets: operator, acme's admin key, acme's member key (acting
// as usr_mem), the other tenant's admin key, no credential.
type roleCase struct {
	method, path, body string
	want               [5]int
}

// roleTable has an entry for every registered /v1 route (keyed by
// method and echo path); TestRouteRoles fails for a route without one.
var roleTable = map[string]roleCase{
	"POST /v1/tenants":                                           {"POST", "/v1/tenants", `{}`, [5]int{400, 403, 403, 403, 401}},
	"GET /v1/tenants":                                            {"GET", "/v1/tenants", ``, [5]int{200, 403, 403, 403, 401}},
	"GET /v1/tenants/:tenant":                                    {"GET", "/v1/tenants/acme", ``, [5]int{200, 200, 200, 404, 401}},
	"GET /v1/connectors":                                         {"GET", "/v1/connectors", ``, [5]int{200, 200, 200, 200, 401}},
	"GET /v1/connectors/:connector":                              {"GET", "/v1/connectors/github", ``, [5]int{200, 200, 200, 200, 401}},
	"GET /v1/connectors/:connector/icons/:size":                  {"GET", "/v1/connectors/github/icons/small", ``, [5]int{200, 200, 200, 200, 401}},
	"PUT /v1/tenants/:tenant/instances/:instance":                {"PUT", "/v1/tenants/acme/instances/gh", `{}`, [5]int{400, 400, 403, 404, 401}},
	"PATCH /v1/tenants/:tenant/instances/:instance":              {"PATCH", "/v1/tenants/acme/instances/gh", `{"agents":["agent-1"]}`, [5]int{200, 200, 403, 404, 401}},
	"GET /v1/tenants/:tenant/instances":                          {"GET", "/v1/tenants/acme/instances", ``, [5]int{200, 200, 200, 404, 401}},
	"GET /v1/tenants/:tenant/instances/:instance":                {"GET", "/v1/tenants/acme/instances/gh", ``, [5]int{200, 200, 200, 404, 401}},
	"DELETE /v1/tenants/:tenant/instances/:instance":             {"DELETE", "/v1/tenants/acme/instances/nope", ``, [5]int{404, 404, 403, 404, 401}},
	"POST /v1/tenants/:tenant/instances/:instance/test":          {"POST", "/v1/tenants/acme/instances/nope/test", ``, [5]int{404, 404, 403, 404, 401}},
	"GET /v1/tenants/:tenant/instances/:instance/grant":          {"GET", "/v1/tenants/acme/instances/gh/grant", ``, [5]int{400, 400, 400, 404, 401}},
	"POST /v1/tenants/:tenant/instances/:instance/grant/connect": {"POST", "/v1/tenants/acme/instances/gh/grant/connect", ``, [5]int{400, 400, 400, 404, 401}},
	"DELETE /v1/tenants/:tenant/instances/:instance/grant":       {"DELETE", "/v1/tenants/acme/instances/gh/grant", ``, [5]int{400, 400, 400, 404, 401}},
	"POST /v1/tenants/:tenant/callers":                           {"POST", "/v1/tenants/acme/callers", `{}`, [5]int{400, 400, 403, 404, 401}},
	"GET /v1/tenants/:tenant/callers":                            {"GET", "/v1/tenants/acme/callers", ``, [5]int{200, 200, 403, 404, 401}},
	"DELETE /v1/tenants/:tenant/callers/:caller":                 {"DELETE", "/v1/tenants/acme/callers/cal_nope", ``, [5]int{404, 404, 403, 404, 401}},
	"POST /v1/tenants/:tenant/api-keys":                          {"POST", "/v1/tenants/acme/api-keys", `{}`, [5]int{400, 400, 403, 404, 401}},
	"GET /v1/tenants/:tenant/api-keys":                           {"GET", "/v1/tenants/acme/api-keys", ``, [5]int{200, 200, 403, 404, 401}},
	"DELETE /v1/tenants/:tenant/api-keys/:key":                   {"DELETE", "/v1/tenants/acme/api-keys/key_nope", ``, [5]int{404, 404, 403, 404, 401}},
	"POST /v1/tenants/:tenant/invitations":                       {"POST", "/v1/tenants/acme/invitations", `{}`, [5]int{400, 403, 403, 404, 401}},
	"GET /v1/tenants/:tenant/audit":                              {"GET", "/v1/tenants/acme/audit", ``, [5]int{200, 200, 200, 404, 401}},
	"PUT /v1/providers/:provider":                                {"PUT", "/v1/providers/nope", `{}`, [5]int{400, 403, 403, 403, 401}},
	"GET /v1/providers":                                          {"GET", "/v1/providers", ``, [5]int{200, 403, 403, 403, 401}},
	"GET /v1/providers/:provider":                                {"GET", "/v1/providers/nope", ``, [5]int{404, 403, 403, 403, 401}},
	"DELETE /v1/providers/:provider":                             {"DELETE", "/v1/providers/nope", ``, [5]int{404, 403, 403, 403, 401}},
	"POST /v1/operator-tokens":                                   {"POST", "/v1/operator-tokens", `{}`, [5]int{400, 403, 403, 403, 401}},
	"GET /v1/operator-tokens":                                    {"GET", "/v1/operator-tokens", ``, [5]int{200, 403, 403, 403, 401}},
	"DELETE /v1/operator-tokens/:token":                          {"DELETE", "/v1/operator-tokens/opt_nope", ``, [5]int{404, 403, 403, 403, 401}},
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
		e.createKey("acme", `{"name":"terraform","role":"admin"}`),
		e.createKey("acme", `{"name":"mine","role":"member","user_id":"usr_mem"}`),
		e.createKey("other", `{"name":"theirs","role":"admin"}`),
		"",
	}
	return e, creds
}

// TestRouteRoles calls every /v1 route with every role and checks the
// exact status; a route registered without an entry in roleTable fails.
// Another tenant's credential gets 404 tenant_not_found on a tenant's
// routes, exactly as for a tenant that does not exist.
func TestRouteRoles(t *testing.T) {
	t.Parallel()
	param := regexp.MustCompile(`:([A-Za-z0-9_]+)`)
	seen := 0
	for _, r := range api.New(api.Config{}).Handler().(*echo.Echo).Routes() {
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
				if res.status != tc.want[i] {
					t.Errorf("%s as %s: %d, want %d: %s", name, roleNames[i], res.status, tc.want[i], res.body)
					continue
				}
				if res.status >= 400 {
					code := res.errCode(t)
					switch {
					case res.status == http.StatusForbidden && code != "role_required":
						t.Errorf("%s as %s: 403 %s, want role_required", name, roleNames[i], code)
					case roleNames[i] == "other tenant" && strings.HasPrefix(name, "GET /v1/tenants/:tenant") && code != "tenant_not_found":
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
		op, admin, member, other := creds[0], creds[1], creds[2], creds[3]
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
		if n := count("/v1/tenants/acme/audit", admin); n != 2 {
			t.Errorf("admin sees %d audit rows, want 2", n)
		}
		if n := count("/v1/tenants/acme/audit?user_id=usr_else", admin); n != 1 {
			t.Errorf("admin filtering by user sees %d rows, want 1", n)
		}
		if c := get("/v1/tenants/acme/audit?user_id=usr_else", member, 403).errCode(t); c != "role_required" {
			t.Errorf("member asking for another user's rows: %s", c)
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
		e.assertNoCanary(canary)
		// The keys appear in their creation response only, never in logs.
		for _, key := range []string{ciKey, admin, member, other, op} {
			if strings.Contains(e.logs.String(), key) {
				t.Errorf("the logs hold a credential")
			}
		}
	})
}
