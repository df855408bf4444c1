package tenantmcp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// The built-in GitHub connector's MCP Apps view on the tenant endpoint:
// listed and read as a resource, named by describe, and a call the host
// marks as the view's held to the view's reads.
func TestTenantEndpointViews(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		var writes atomic.Int64
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.Method != http.MethodGet {
				writes.Add(1)
			}
			io.WriteString(w, `[{"number":1,"title":"First","state":"open","user":{"login":"ada"}}]`)
		}))
		t.Cleanup(up.Close)
		cat, err := registry.LoadCatalog(catalog.FS(), openapi.Compile)
		if err != nil {
			t.Fatal(err)
		}
		srv := servertest.Start(t, server.Config{DB: db, ConnectorCatalog: cat})
		ctx := context.Background()
		svc := srv.Tenants()
		if _, err := svc.CreateTenant(ctx, "acme", "Acme"); err != nil {
			t.Fatal(err)
		}
		u, k := secrets.New(up.URL), secrets.New("gh-token")
		// gh2's endpoint serves the meta-tools (tools_mode meta).
		for slug, mode := range map[string]string{"gh": tenants.ToolsList, "gh2": tenants.ToolsMeta} {
			if _, _, err := svc.Install(ctx, "acme", slug, tenants.InstallRequest{ConnectorID: "github", AuthMode: "apiKey",
				Fields: map[string]*secrets.Secret{"GITHUB_API_URL": &u, "GITHUB_TOKEN": &k}, Agents: []string{"bot"}, ToolsMode: mode}); err != nil {
				t.Fatal(err)
			}
		}
		_, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{url: srv.URL, token: tok.Reveal()}
		cs := f.session(t, "bot")

		// One entry for the two instances of the connector.
		list, err := cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Resources) != 1 || list.Resources[0].URI != "ui://github/issues-table" || list.Resources[0].MIMEType != registry.AppMIMEType {
			t.Fatalf("resources/list = %+v", list.Resources)
		}
		read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "ui://github/issues-table"})
		if err != nil {
			t.Fatal(err)
		}
		if c := read.Contents[0]; !strings.Contains(c.Text, `<meta http-equiv="Content-Security-Policy" content="default-src 'none';`) || c.Meta["ui"] == nil {
			t.Errorf("resources/read: _meta %v, text %.200s", c.Meta, c.Text)
		}
		if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "ui://github/other"}); err == nil {
			t.Error("an unknown view was read")
		}

		out, isErr := call(t, cs, "describe", map[string]any{"address": "gh.issues.list"})
		if isErr || out["view"] != "ui://github/issues-table" {
			t.Errorf("describe = %v", out)
		}

		marked := sdk.Meta{registry.AppMetaKey: map[string]any{"resourceUri": "ui://github/issues-table"}}
		for _, c := range []struct {
			address string
			want    string
		}{
			{"gh.issues.create", "app_write_refused"},
			{"gh.issues.get", "app_tool_not_allowed"},
			{"gh.pull_requests.merge", "app_write_refused"},
			{"gh2.issues.list", ""},
		} {
			args := map[string]any{"owner": "octo", "repo": "hello"}
			if c.want != "" {
				// Refused before the arguments are checked.
				args["title"], args["issue_number"], args["pull_number"] = "x", 1, 1
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "call", Meta: marked, Arguments: map[string]any{"address": c.address, "arguments": args}})
			if err != nil {
				t.Fatal(err)
			}
			code := ""
			if res.IsError {
				sc, _ := res.StructuredContent.(map[string]any)
				code = errCode(sc)
			}
			if code != c.want {
				t.Errorf("marked call %s: code %q, want %q (%v)", c.address, code, c.want, res.StructuredContent)
			}
		}
		// The instance endpoint in meta mode: the same views and rule.
		c := sdk.NewClient(&sdk.Implementation{Name: "host", Version: "1"}, nil)
		inst, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL + "/workspaces/acme/webhooks/gh2.mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: headers{"Authorization": "Bearer " + f.token, "X-Agent-Id": "bot"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer inst.Close()
		if list, err := inst.ListResources(ctx, nil); err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "ui://github/issues-table" {
			t.Errorf("meta-mode instance resources/list = %v, %v", list, err)
		}
		res, err := inst.CallTool(ctx, &sdk.CallToolParams{Name: "call", Meta: marked, Arguments: map[string]any{"address": "gh2.issues.create",
			"arguments": map[string]any{"owner": "octo", "repo": "hello", "title": "x"}}})
		if err != nil {
			t.Fatal(err)
		}
		if sc, _ := res.StructuredContent.(map[string]any); !res.IsError || errCode(sc) != "app_write_refused" {
			t.Errorf("meta-mode instance, marked write: %v", res.StructuredContent)
		}
		if n := writes.Load(); n != 0 {
			t.Errorf("%d writes reached the upstream from a view", n)
		}
	})
}
