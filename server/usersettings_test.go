package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/signin"
)

// vault is an openapi connector whose API key is each user's own (a field
// of scope user): the admin installs it with the upstream's URL only.
var vault = map[string]string{
	"vault/connector.json": `{
  "id": "vault", "name": "Vault", "version": "1.0.0", "type": "openapi", "scope": "global", "requires": ["API_KEY"],
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [
    {"name": "API_URL", "label": "API URL", "required": true},
    {"name": "API_KEY", "label": "Your API key", "required": true, "secret": true, "scope": "user"}
  ],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`,
	"vault/openapi.json": `{
  "openapi": "3.0.3", "info": {"title": "Vault", "version": "1"},
  "paths": {"/whoami": {"get": {"operationId": "whoami", "x-entity": "whoami", "x-action": "get", "summary": "Whose key",
     "responses": {"200": {"description": "ok"}}}}}
}`,
}

// TestUserScopeSettings: each member sets their own value of a
// user-scope field through the API (and the console form); a call for a
// user runs with that user's value only, and a user without one gets
// consent_required with the link to their settings page; no admin, owner
// or operator reads a member's values back; an install cannot set them;
// removing the member deletes their rows and keeps everyone else's.
func TestUserScopeSettings(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		var (
			mu  sync.Mutex
			saw []string
		)
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			saw = append(saw, r.Header.Get("X-Api-Key"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"key_length": %d}`, len(r.Header.Get("X-Api-Key")))
		}))
		defer up.Close()
		as := authztest.New(t, authztest.Options{})
		srv := servertest.Start(t, server.Config{DB: db, AdminToken: secrets.New(pathOperator),
			ConnectorCatalog: registrytest.Load(t, vault)})
		base := srv.URL
		operator := map[string]string{"Authorization": "Bearer " + pathOperator}
		anon := newPerson(t, base, as.URL, "nobody")
		anon.must(http.StatusCreated, http.MethodPost, "/v1/tenants", `{"slug": "acme", "name": "Acme"}`, operator)
		inv := anon.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/invitations", `{"email": "olga@acme.test", "role": "owner"}`, operator)
		owner := newPerson(t, base, as.URL, "olga@acme.test")
		owner.signIn(inv["url"].(string))
		ann := newPerson(t, base, as.URL, "ann@acme.test")
		bob := newPerson(t, base, as.URL, "bob@acme.test")
		for _, p := range []struct {
			p     *person
			email string
		}{{ann, "ann@acme.test"}, {bob, "bob@acme.test"}} {
			p.p.signIn(owner.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/invitations",
				fmt.Sprintf(`{"email": %q, "role": "member"}`, p.email), nil)["url"].(string))
		}
		userOf := func(p *person) string {
			return p.must(http.StatusOK, http.MethodGet, signin.SessionPath, "", nil)["user_id"].(string)
		}
		annID, bobID := userOf(ann), userOf(bob)

		// An install cannot set a user's value.
		if st, body := owner.do(http.MethodPut, "/v1/tenants/acme/instances/vault", fmt.Sprintf(
			`{"connector_id": "vault", "auth_mode": "apiKey", "agents": ["bot"], "fields": {"API_URL": %q, "API_KEY": "admin-chosen"}}`, up.URL), nil); st != 400 || !strings.Contains(body, "user_field") {
			t.Fatalf("install with a user-scope value = %d %s", st, body)
		}
		owner.must(http.StatusCreated, http.MethodPut, "/v1/tenants/acme/instances/vault", fmt.Sprintf(
			`{"connector_id": "vault", "auth_mode": "apiKey", "agents": ["bot"], "fields": {"API_URL": %q}}`, up.URL), nil)
		platform := owner.must(http.StatusCreated, http.MethodPost, "/v1/tenants/acme/callers",
			`{"name": "agent-platform", "kind": "agent-platform", "trusted": true, "user_mode": "header"}`, nil)["token"].(string)

		call := func(user string) (*mcp.CallToolResult, string) {
			t.Helper()
			cs := agentSession(t, base+"/workspaces/acme/webhooks/vault.mcp",
				headerTransport{"Authorization": "Bearer " + platform, "X-Agent-Id": "bot", "X-User-Id": user})
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{"action": "get"}})
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			out, _ := json.Marshal(res)
			return res, string(out)
		}

		// Before Ann sets her key: consent_required, with her settings page.
		res, out := call(annID)
		if !res.IsError || !strings.Contains(out, "consent_required") || !strings.Contains(out, base+"/console/instances/vault/settings") {
			t.Fatalf("call before settings = %s", out)
		}
		if len(saw) != 0 {
			t.Fatalf("the upstream was called without the user's key: %q", saw)
		}

		// Each sets their own key: Ann through the API, Bob through the
		// console's form.
		ann.must(http.StatusOK, http.MethodPut, "/v1/tenants/acme/instances/vault/settings", `{"fields": {"API_KEY": "ann-key-0001"}}`, nil)
		if st, page := bob.do(http.MethodGet, "/console/instances/vault/settings", "", nil); st != 200 || !strings.Contains(page, "field_API_KEY") {
			t.Fatalf("bob's settings page = %d %s", st, page)
		}
		if st, page := bob.postForm("/console/instances/vault/settings", url.Values{"field_API_KEY": {"bob-key-0002"}}); st != 200 || !strings.Contains(page, `id="saved"`) {
			t.Fatalf("bob's settings form = %d %s", st, page)
		}

		for _, c := range []struct{ user, key string }{{annID, "ann-key-0001"}, {bobID, "bob-key-0002"}, {annID, "ann-key-0001"}} {
			mu.Lock()
			saw = nil
			mu.Unlock()
			if res, out := call(c.user); res.IsError {
				t.Fatalf("call as %s = %s", c.user, out)
			} else if strings.Contains(out, c.key) {
				t.Errorf("the user's key reached the agent: %s", out)
			}
			mu.Lock()
			if len(saw) != 1 || saw[0] != c.key {
				t.Errorf("call as %s: the upstream saw %q, want only %q", c.user, saw, c.key)
			}
			mu.Unlock()
		}

		// Nobody else reads Ann's values: not the owner, not the operator;
		// her own view says set, without the value.
		for name, st := range map[string]int{
			"owner": func() int {
				s, _ := owner.do(http.MethodGet, "/v1/tenants/acme/instances/vault/settings?user_id="+annID, "", nil)
				return s
			}(),
			"bob": func() int {
				s, _ := bob.do(http.MethodGet, "/v1/tenants/acme/instances/vault/settings?user_id="+annID, "", nil)
				return s
			}(),
			"operator": func() int {
				s, _ := anon.do(http.MethodGet, "/v1/tenants/acme/instances/vault/settings?user_id="+annID, "", operator)
				return s
			}(),
		} {
			if st != http.StatusForbidden {
				t.Errorf("%s reads ann's settings: %d, want 403", name, st)
			}
		}
		for _, p := range []*person{owner, ann} {
			if st, body := p.do(http.MethodGet, "/v1/tenants/acme/instances/vault/settings", "", nil); st != 200 || strings.Contains(body, "ann-key") {
				t.Errorf("own settings = %d %s", st, body)
			}
		}
		if own := ann.must(http.StatusOK, http.MethodGet, "/v1/tenants/acme/instances/vault/settings", "", nil); own["complete"] != true {
			t.Errorf("ann's own settings = %v", own)
		}
		if _, body := owner.do(http.MethodGet, "/v1/tenants/acme/instances/vault", "", nil); strings.Contains(body, "ann-key") {
			t.Errorf("the instance view shows a user's value: %s", body)
		}

		// Removing Ann deletes her rows, and only hers.
		userRows := func(user string) int {
			return dbtest.Count(t, db, "secrets", "owner LIKE 'user:%' AND substr(owner, length(owner) - $1 + 1) = $2", len(user)+1, ":"+user)
		}
		if userRows(annID) != 1 || userRows(bobID) != 1 {
			t.Fatalf("before removal: ann %d rows, bob %d", userRows(annID), userRows(bobID))
		}
		owner.must(http.StatusOK, http.MethodDelete, "/v1/tenants/acme/members/"+annID, "", nil)
		if n := userRows(annID); n != 0 {
			t.Errorf("%d user-scope rows of the removed member remain", n)
		}
		if n := userRows(bobID); n != 1 {
			t.Errorf("bob's user-scope rows after ann's removal: %d, want 1", n)
		}
		if res, out := call(bobID); res.IsError {
			t.Errorf("bob's call after ann's removal = %s", out)
		}
	})
}

// postForm submits a console form as the browser does: with the
// session's CSRF token and the server's own origin; it follows the
// redirect.
func (p *person) postForm(path string, form url.Values) (int, string) {
	p.t.Helper()
	_, s := p.do(http.MethodGet, signin.SessionPath, "", nil)
	var sess struct {
		CSRF string `json:"csrf_token"`
	}
	json.Unmarshal([]byte(s), &sess)
	form.Set(signin.CSRFField, sess.CSRF)
	req, _ := http.NewRequest(http.MethodPost, p.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", p.base)
	res, err := p.client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// agentSession opens an MCP session with the official client, as an
// agent does, sending headers with every request; it ends with the test.
func agentSession(t *testing.T, endpoint string, headers headerTransport) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: endpoint, MaxRetries: -1, HTTPClient: &http.Client{Transport: headers},
	}, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
