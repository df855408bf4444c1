package tenantmcp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// perUserCatalog has a connector whose instances act with each user's
// own OAuth grant (mail, oauth mode) and one with a user-scope field each
// user sets (notes), beside the shared-key crm of testCatalog.
var perUserCatalog = map[string]string{
	"crm/connector.json": testCatalog["crm/connector.json"],
	"crm/openapi.json":   testCatalog["crm/openapi.json"],
	"crm/guide.md":       testCatalog["crm/guide.md"],
	"mail/connector.json": `{
  "id": "mail", "name": "Mail", "version": "1.0.0", "type": "openapi", "scope": "global",
  "auth": {"type": "oauth2", "modes": ["oauth"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY", "scopes": ["mail.read"]},
  "env": [{"name": "API_URL", "label": "API URL", "required": true}, {"name": "API_KEY", "label": "API key", "secret": true},
    {"name": "CLIENT_ID", "label": "Client id"}, {"name": "CLIENT_SECRET", "label": "Client secret", "secret": true},
    {"name": "AUTHORIZE_URL", "label": "Authorize URL"}, {"name": "TOKEN_URL", "label": "Token URL"}],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`,
	"mail/openapi.json": `{
  "openapi": "3.0.3", "info": {"title": "Mail", "version": "1"},
  "paths": {"/mailbox": {"get": {"operationId": "getMailbox", "x-entity": "mailbox", "x-action": "get", "summary": "Read the user's mailbox",
     "responses": {"200": {"description": "ok"}}}}}
}`,
	"notes/connector.json": `{
  "id": "notes", "name": "Notes", "version": "1.0.0", "type": "openapi", "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [{"name": "API_URL", "label": "API URL", "required": true}, {"name": "API_KEY", "label": "API key", "required": true, "secret": true},
    {"name": "NOTEBOOK", "label": "Your notebook", "required": true, "scope": "user"}],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`,
	"notes/openapi.json": `{
  "openapi": "3.0.3", "info": {"title": "Notes", "version": "1"},
  "paths": {"/notebook": {"get": {"operationId": "getNotebook", "x-entity": "notebook", "x-action": "get", "summary": "Read the user's notebook",
     "responses": {"200": {"description": "ok"}}}}}
}`,
}

// TestSearchCountsNotConnected: a search reports, per calling user, the
// instances that user has not connected (their own OAuth grant, their
// own settings) under unavailable.notConnected with where they connect,
// instead of their actions, while another user of the same agent who
// did connect finds and calls them; disconnecting counts the instance
// again. Two users of one trusted platform, official SDK client, both
// stores.
func TestSearchCountsNotConnected(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		as := authztest.New(t, authztest.Options{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			who, _ := as.Validate(r)
			fmt.Fprintf(w, `{"user": %q, "key": %q}`, who, r.Header.Get("X-Api-Key"))
		}))
		t.Cleanup(up.Close)
		srv := servertest.Start(t, server.Config{DB: db, ConnectorCatalog: registrytest.Load(t, perUserCatalog),
			Audit: audit.WriterOptions{Interval: 20 * time.Millisecond}})
		ctx := context.Background()
		svc := srv.Tenants()
		if _, err := svc.CreateTenant(ctx, "acme", "Acme"); err != nil {
			t.Fatal(err)
		}
		secret := "mail-client-secret-canary-4d2e"
		as.AddClient(authztest.Client{ID: "mail-app", Secret: secret,
			RedirectURIs: []string{srv.URL + "/workspaces/acme/webhooks/mail/oauth/callback"}, Scopes: []string{"mail.read"}})
		install := func(slug, connector, mode string, fields map[string]string) {
			f := map[string]*secrets.Secret{}
			for k, v := range fields {
				s := secrets.New(v)
				f[k] = &s
			}
			if _, _, err := svc.Install(ctx, "acme", slug, tenants.InstallRequest{ConnectorID: connector, AuthMode: mode, Fields: f, Agents: []string{"bot"}}); err != nil {
				t.Fatalf("install %s: %v", slug, err)
			}
		}
		install("crm", "crm", "apiKey", map[string]string{"API_URL": up.URL, "API_KEY": "crm-key"})
		install("mail", "mail", "oauth", map[string]string{"API_URL": up.URL, "CLIENT_ID": "mail-app", "CLIENT_SECRET": secret,
			"AUTHORIZE_URL": as.AuthorizeURL(), "TOKEN_URL": as.TokenURL()})
		install("notes", "notes", "apiKey", map[string]string{"API_URL": up.URL, "API_KEY": "notes-key"})
		_, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform, Trusted: true,
			UserMode: tenants.UserHeader, ExternalSubjects: []string{"alice", "bob"}})
		if err != nil {
			t.Fatal(err)
		}
		token := tok.Reveal()

		// alice connects mail at the authorization server and sets her
		// notebook; bob does neither.
		browser := as.Browser("alice", map[string]string{"Authorization": "Bearer " + token, "X-User-Id": "alice"})
		res, err := browser.Get(srv.URL + "/workspaces/acme/webhooks/mail/oauth/connect?redirect=1")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(page), "Connected") {
			t.Fatalf("alice's connect = %d %s", res.StatusCode, page)
		}
		book := secrets.New("alice-book")
		if _, err := svc.SetUserSettings(ctx, "acme", "notes", "alice", map[string]*secrets.Secret{"NOTEBOOK": &book}); err != nil {
			t.Fatal(err)
		}

		session := func(user string) *sdk.ClientSession {
			c := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL + "/workspaces/acme/mcp", MaxRetries: -1,
				HTTPClient: &http.Client{Transport: headers{"Authorization": "Bearer " + token, "X-Agent-Id": "bot", "X-User-Id": user}}}, nil)
			if err != nil {
				t.Fatalf("connect %s: %v", user, err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		alice, bob := session("alice"), session("bob")
		search := func(cs *sdk.ClientSession) ([]string, map[string]any) {
			out, isErr := call(t, cs, "search", map[string]any{"query": "read the mailbox, the notebook and the contacts", "limit": 50})
			if isErr {
				t.Fatalf("search = %v", out)
			}
			u, _ := out["unavailable"].(map[string]any)
			return addresses(out), u
		}
		instancesOf := func(addrs []string) []string {
			var out []string
			for _, a := range addrs {
				inst, _, _ := strings.Cut(a, ".")
				if !slices.Contains(out, inst) {
					out = append(out, inst)
				}
			}
			slices.Sort(out)
			return out
		}

		// bob: mail and notes are counted, with where he connects, and
		// not searched; crm, whose key is the instance's, is.
		hits, u := search(bob)
		if got := instancesOf(hits); !slices.Equal(got, []string{"crm"}) {
			t.Errorf("bob's hits are of %v, want crm only", got)
		}
		if u == nil || u["count"] != float64(2) || u["notConnected"] != float64(2) {
			t.Fatalf("bob's unavailable = %v", u)
		}
		want := map[string][2]string{
			"mail":  {"reconnect_required", srv.URL + "/workspaces/acme/webhooks/mail/oauth/connect"},
			"notes": {"consent_required", "/console/instances/notes/settings"},
		}
		for _, x := range u["instances"].([]any) {
			in := x.(map[string]any)
			w, ok := want[in["instance"].(string)]
			if url, _ := in["connectUrl"].(string); !ok || in["code"] != w[0] || !strings.HasSuffix(url, w[1]) {
				t.Errorf("bob's unavailable instance %v, want %v", in, w)
			}
		}
		// What bob's call of mail answers agrees with what his search said.
		if out, isErr := call(t, bob, "call", map[string]any{"address": "mail.mailbox.get"}); !isErr || errCode(out) != "reconnect_required" {
			t.Errorf("bob's call of mail = %v", out)
		}

		// alice: everything is searchable, nothing unavailable, and her
		// call of mail carries her own grant.
		hits, u = search(alice)
		if got := instancesOf(hits); !slices.Equal(got, []string{"crm", "mail", "notes"}) || u != nil {
			t.Errorf("alice's hits are of %v, unavailable %v", got, u)
		}
		if out, isErr := call(t, alice, "call", map[string]any{"address": "mail.mailbox.get"}); isErr || out["user"] != "alice" {
			t.Errorf("alice's call of mail = %v", out)
		}

		// alice disconnects mail: her search counts it again.
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/workspaces/acme/webhooks/mail/oauth/disconnect", nil)
		if res, err := browser.Do(req); err != nil || res.StatusCode != 200 {
			t.Fatalf("disconnect = %v %v", res, err)
		} else {
			res.Body.Close()
		}
		if _, u := search(alice); u == nil || u["notConnected"] != float64(1) {
			t.Errorf("alice's unavailable after disconnecting = %v", u)
		}
	})
}
