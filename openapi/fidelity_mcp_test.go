package openapi_test

// The fidelity test again, through the whole agent path: each vendor
// description becomes a generated connector package in a catalog, a
// tenant installs it, and an agent calls every operation with MCP
// tools/call (the official Go SDK client) over the MCP endpoint, the
// gateway and the guarded egress client, to the validating upstream.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// agentHeaders authenticates the MCP client as an agent platform.
type agentHeaders struct{ token string }

func (h agentHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	r.Header.Set("X-Agent-Id", "fidelity-agent")
	return http.DefaultTransport.RoundTrip(r)
}

// catalogOf writes the generated package of a description as a one-
// connector catalog and loads it the way the server does.
func catalogOf(t *testing.T, c *compiled, file string) (*registry.Catalog, *registry.Connector) {
	t.Helper()
	pkg, err := openapi.Generate(c.spec, nil, openapi.GenerateOptions{SpecName: file})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	var m registry.Manifest
	if err := json.Unmarshal(pkg.Files[openapi.ManifestFile], &m); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for name, b := range pkg.Files {
		files[m.ID+"/"+name] = string(b)
	}
	cat := registrytest.Load(t, files)
	conn, ok := cat.Connector(m.ID)
	if !ok {
		t.Fatalf("connector %s not loaded", m.ID)
	}
	return cat, conn
}

// mcpSession installs the connector for a tenant, its base URL pointing at
// upstream, and connects an agent to the instance's MCP endpoint.
func mcpSession(t *testing.T, cat *registry.Catalog, conn *registry.Connector, upstream string) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t), ConnectorCatalog: cat})
	svc := srv.Tenants()
	if _, err := svc.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
	m := conn.Manifest
	fields := map[string]*secrets.Secret{}
	for _, f := range m.Env {
		v := secrets.New("fidelity-credential")
		if strings.Contains(m.BaseURL, "{ENV:"+f.Name+"}") {
			v = secrets.New(upstream)
		}
		fields[f.Name] = &v
	}
	if _, _, err := svc.Install(ctx, "acme", "vendor", tenants.InstallRequest{
		ConnectorID: m.ID, AuthMode: m.Auth.Modes[0], Fields: fields, Agents: []string{"fidelity-agent"},
	}); err != nil {
		t.Fatalf("Install: %v", err)
	}
	_, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
	if err != nil {
		t.Fatalf("CreateCaller: %v", err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "fidelity-agent", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sess, err := client.Connect(cctx, &sdk.StreamableClientTransport{
		Endpoint:             srv.URL + "/workspaces/acme/webhooks/vendor.mcp",
		HTTPClient:           &http.Client{Transport: agentHeaders{token: tok.Reveal()}},
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// TestVendorFidelityThroughMCP calls every operation of each description
// with MCP tools/call, and checks tools/list and the describe action on
// the way.
func TestVendorFidelityThroughMCP(t *testing.T) {
	t.Parallel()
	specstest.Dir(t)
	for _, file := range vendorSpecs {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			c := compileSpec(t, file)
			cat, conn := catalogOf(t, c, file)
			if got, want := string(conn.Spec.ToolsJSON()), string(c.result.Spec.ToolsJSON()); got != want {
				t.Errorf("the generated package (with its mapping) compiles to other tools than the description alone")
			}
			var sess *sdk.ClientSession
			o := exercise(t, c, func(v *validator, cl call, baseURL string) error {
				if sess == nil {
					sess = mcpSession(t, cat, conn, baseURL)
					checkToolsList(t, sess, conn.Spec)
				}
				if cl.ownServer {
					// The gateway would send it to the vendor's own host:
					// never leave loopback.
					return errSkip
				}
				args := map[string]any{"action": cl.action}
				for k, x := range cl.args {
					args[k] = x
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: cl.entity, Arguments: args})
				if err != nil {
					return err
				}
				if res.IsError {
					return fmt.Errorf("tool error: %s", toolText(res))
				}
				return nil
			})
			report(t, file+" via MCP", o, 50)
		})
	}
}

// checkToolsList checks what the agent sees: one tool per entity, within
// the budget, and each action's parameters one describe call away.
func checkToolsList(t *testing.T, sess *sdk.ClientSession, api *registry.Spec) {
	t.Helper()
	ctx := context.Background()
	list, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	b, _ := json.Marshal(list)
	t.Logf("tools/list: %d tools, %d bytes as the client reads it; ToolsJSON %d bytes", len(list.Tools), len(b), api.ToolsListSize())
	if len(list.Tools) != len(api.Entities) || len(list.Tools) > openapi.MaxEntities {
		t.Errorf("%d tools, want %d (at most %d)", len(list.Tools), len(api.Entities), openapi.MaxEntities)
	}
	if len(b) > openapi.ToolsBudget {
		t.Errorf("tools/list is %d bytes, over %d", len(b), openapi.ToolsBudget)
	}
	e := api.Entities[0]
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: e.Name, Arguments: map[string]any{"action": registry.DescribeAction, registry.DescribeTarget: e.Actions[0].Name}})
	if err != nil || res.IsError {
		t.Fatalf("describe: %v %s", err, toolText(res))
	}
	if sc, ok := res.StructuredContent.(map[string]any); !ok || sc["inputSchema"] == nil || sc["action"] != e.Actions[0].Name {
		t.Errorf("describe answered %s", toolText(res))
	}
}

func toolText(res *sdk.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	s := b.String()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
