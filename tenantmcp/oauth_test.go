package tenantmcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/mcp"
	"github.com/switchboardhq/switchboard/server"
)

// TestTenantEndpointAccessTokens: with MCP authorization on, the tenant
// endpoint accepts the OAuth access tokens the instance endpoints accept
// (issuer, signature, expiry, scope; its own URL as the audience; the
// token's OAuth client is the agent each instance's allowlist must name),
// advertises its RFC 9728 metadata in the 401's challenge, and refuses a
// token meant for an instance endpoint. Official SDK client, both stores.
func TestTenantEndpointAccessTokens(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{})
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		f := newFixture(t, db, func(c *server.Config) {
			c.MCPAuthServers, c.MCPJWKSURL, c.MCPScopes = []string{as.Issuer()}, as.JWKSURL(), []string{"mcp"}
		})
		endpoint := f.url + "/workspaces/acme/mcp"
		metadata := f.url + mcp.WellKnownPrefix + "/workspaces/acme/mcp"
		token := func(mut func(map[string]any)) string {
			c := map[string]any{"iss": as.Issuer(), "sub": "user-42", "aud": endpoint, "exp": time.Now().Add(time.Hour).Unix(),
				"iat": time.Now().Unix(), "client_id": "bot", "scope": "mcp offline"}
			if mut != nil {
				mut(c)
			}
			return as.SignJWT(t, c)
		}

		res, err := http.Get(metadata)
		if err != nil {
			t.Fatal(err)
		}
		var md mcp.ProtectedResourceMetadata
		json.NewDecoder(res.Body).Decode(&md)
		res.Body.Close()
		if res.StatusCode != 200 || md.Resource != endpoint || !slices.Equal(md.AuthorizationServers, []string{as.Issuer()}) {
			t.Errorf("metadata = %d %+v", res.StatusCode, md)
		}

		post := func(bearer string) (int, string, string) {
			req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body strings.Builder
			buf := make([]byte, 4096)
			n, _ := res.Body.Read(buf)
			body.Write(buf[:n])
			return res.StatusCode, res.Header.Get("WWW-Authenticate"), body.String()
		}
		if st, challenge, _ := post(""); st != 401 || challenge != fmt.Sprintf(`Bearer resource_metadata=%q`, metadata) {
			t.Errorf("no credential = %d %q", st, challenge)
		}
		for _, tc := range []struct {
			name, token string
			status      int
			code        string
		}{
			{"an instance endpoint's token", token(func(c map[string]any) { c["aud"] = f.url + "/workspaces/acme/webhooks/crm.mcp" }), 401, "invalid_token"},
			{"another tenant's endpoint", token(func(c map[string]any) { c["aud"] = f.url + "/workspaces/other/mcp" }), 401, "invalid_token"},
			{"expired", token(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), 401, "invalid_token"},
			{"insufficient scope", token(func(c map[string]any) { c["scope"] = "offline" }), 403, "insufficient_scope"},
			{"no client", token(func(c map[string]any) { delete(c, "client_id") }), 403, "missing_agent_id"},
		} {
			if st, _, body := post(tc.token); st != tc.status || !strings.Contains(body, tc.code) {
				t.Errorf("%s = %d %s", tc.name, st, body)
			}
		}

		// The right token: the official SDK client searches and calls as
		// the token's client, the agent bot.
		connect := func(tok string) *sdk.ClientSession {
			c := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
				HTTPClient: &http.Client{Transport: headers{"Authorization": "Bearer " + tok}}}, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		cs := connect(token(nil))
		out, isErr := call(t, cs, "search", map[string]any{"query": "contacts", "limit": 50})
		if isErr || len(addresses(out)) != 3 || slices.ContainsFunc(addresses(out), func(a string) bool { return strings.HasPrefix(a, "hidden.") }) {
			t.Errorf("search as bot = %v", out)
		}
		if out, isErr := call(t, cs, "call", map[string]any{"address": "crm.contacts.list"}); isErr || out["ok"] != true {
			t.Fatalf("call as bot = %v", out)
		}
		f.mu.Lock()
		saw := slices.Clone(f.saw)
		f.mu.Unlock()
		if !slices.Equal(saw, []string{"GET /contacts crm-key-1"}) {
			t.Errorf("upstream saw %q", saw)
		}
		waitAudit(t, f.srv, f.tenant, "crm", func(r audit.Entry) bool { return r.Agent == "bot" && r.Tool == "contacts" && r.Outcome == "ok" })
		// Another client is another agent: only the instances that allow it.
		other := connect(token(func(c map[string]any) { c["client_id"] = "other" }))
		if out, _ := call(t, other, "search", map[string]any{"query": "contacts", "limit": 50}); len(addresses(out)) != 3 ||
			slices.ContainsFunc(addresses(out), func(a string) bool { return !strings.HasPrefix(a, "hidden.") }) {
			t.Errorf("search as other = %v", out)
		}
	})
}
