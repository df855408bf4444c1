package mcp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/tenants"
)

// The MCP Apps example: the built-in GitHub connector's issues table
// (catalog/builtin/github/apps/issues-table.html), served by the instance
// endpoint of a server built as serve builds it, over a loopback GitHub.

const (
	appURI    = "ui://github/issues-table"
	appBridge = "github_issues_read"
	ghToken   = "canary-gh-token-5e1d7a"
)

// githubAPI is a loopback GitHub: two issues of octo/hello, and a count
// of the writes it was sent (which no view may cause).
type githubAPI struct {
	srv    *httptest.Server
	reads  atomic.Int64
	writes atomic.Int64
}

func newGitHubAPI(t testing.TB) *githubAPI {
	g := &githubAPI{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+ghToken {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message":"Bad credentials"}`)
			return
		}
		if r.URL.Path != "/repos/octo/hello/issues" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"Not Found"}`)
			return
		}
		if r.Method != http.MethodGet {
			g.writes.Add(1)
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"number":3,"title":"written","state":"open","user":{"login":"eve"}}`)
			return
		}
		g.reads.Add(1)
		io.WriteString(w, `[{"number":1,"title":"Login page <b>crashes</b>","state":"open","user":{"login":"ada"}},`+
			`{"number":2,"title":"Typo in README","state":"closed","user":{"login":"grace"}}]`)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// githubStack is a server with the built-in catalog, a tenant acme with
// the GitHub instance "gh" (agent-1 allowed) on gh, and a caller token.
func githubStack(t testing.TB, db *database.DB, gh *githubAPI) (*stack, string) {
	t.Helper()
	cat, err := registry.LoadCatalog(catalog.FS(), openapi.Compile)
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, db, widgetsSpec, func(c *server.Config) { c.ConnectorCatalog = cat })
	ctx := context.Background()
	if _, err := s.svc.CreateTenant(ctx, "acme", "acme"); err != nil {
		t.Fatal(err)
	}
	url, tok := secrets.New(gh.srv.URL), secrets.New(ghToken)
	if _, _, err := s.svc.Install(ctx, "acme", "gh", tenants.InstallRequest{
		ConnectorID: "github", AuthMode: "apiKey",
		Fields: map[string]*secrets.Secret{"GITHUB_API_URL": &url, "GITHUB_TOKEN": &tok},
		Agents: []string{"agent-1"},
	}); err != nil {
		t.Fatalf("Install: %v", err)
	}
	return s, s.caller(t, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
}

// errorCode is the code of a tool error result, "" for a success.
func errorCode(res *sdk.CallToolResult) string {
	if !res.IsError {
		return ""
	}
	m, _ := res.StructuredContent.(map[string]any)
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestAppsOnTheInstanceEndpoint(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		gh := newGitHubAPI(t)
		s, tok := githubStack(t, db, gh)
		sess := mustConnect(t, s, "acme", "gh", tok, "agent-1")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()

		t.Run("tools/list", func(t *testing.T) {
			res, err := sess.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			ui := map[string]map[string]any{}
			for _, tool := range res.Tools {
				if m, ok := tool.Meta["ui"].(map[string]any); ok {
					ui[tool.Name] = m
				}
				if tool.Name == appBridge && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint) {
					t.Errorf("bridge annotations = %+v, want readOnlyHint", tool.Annotations)
				}
			}
			// issues writes too: a conforming host keeps views off it.
			if got := ui["issues"]; got["resourceUri"] != appURI || !sameList(got["visibility"], "model") {
				t.Errorf("issues _meta.ui = %v, want resourceUri %s, visibility [model]", got, appURI)
			}
			if got := ui[appBridge]; got["resourceUri"] != appURI || !sameList(got["visibility"], "app") {
				t.Errorf("%s _meta.ui = %v, want visibility [app]", appBridge, got)
			}
			if len(ui) != 2 {
				t.Errorf("tools with _meta.ui: %v, want issues and %s", ui, appBridge)
			}
		})

		t.Run("resources", func(t *testing.T) {
			list, err := sess.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Resources) != 1 || list.Resources[0].URI != appURI || list.Resources[0].MIMEType != registry.AppMIMEType {
				t.Fatalf("resources/list = %+v", list.Resources)
			}
			read, err := sess.ReadResource(ctx, &sdk.ReadResourceParams{URI: appURI})
			if err != nil {
				t.Fatal(err)
			}
			c := read.Contents[0]
			if c.MIMEType != registry.AppMIMEType {
				t.Errorf("mimeType = %q", c.MIMEType)
			}
			ui, _ := c.Meta["ui"].(map[string]any)
			if _, ok := ui["csp"].(map[string]any); !ok || ui["prefersBorder"] != true {
				t.Errorf("_meta.ui = %v, want csp and prefersBorder", ui)
			}
			// The policy is the first thing in the head.
			want := `<head><meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; `
			if !strings.Contains(c.Text, want) {
				t.Errorf("the view's HTML does not start its head with the policy (want %q):\n%.300s", want, c.Text)
			}
			for _, d := range []string{"connect-src 'none'", "frame-src 'none'", "object-src 'none'", "form-action 'none'"} {
				if !strings.Contains(c.Text, d) {
					t.Errorf("policy lacks %s", d)
				}
			}
			if _, err := sess.ReadResource(ctx, &sdk.ReadResourceParams{URI: "ui://github/nothing"}); err == nil {
				t.Error("an unknown view was read")
			}
		})

		t.Run("bridge reads", func(t *testing.T) {
			res := callTool(t, sess, appBridge, map[string]any{"action": "list", "owner": "octo", "repo": "hello"})
			if res.IsError || !strings.Contains(resultText(t, res), "Typo in README") {
				t.Fatalf("bridge list = %s", resultText(t, res))
			}
		})

		before := gh.writes.Load()
		marked := sdk.Meta{registry.AppMetaKey: map[string]any{"resourceUri": appURI}}
		for _, c := range []struct {
			name, tool, action string
			meta               sdk.Meta
			want               string
		}{
			{"bridge write", appBridge, "create", nil, "app_write_refused"},
			{"bridge other read", appBridge, "get", nil, "app_tool_not_allowed"},
			{"bridge describe", appBridge, "describe", nil, "app_tool_not_allowed"},
			{"marked entity write", "issues", "create", marked, "app_write_refused"},
			{"marked bridged read", "issues", "list", marked, ""},
			{"marked other read", "issues", "get", marked, "app_tool_not_allowed"},
			{"marked other tool", "pull_requests", "merge", marked, "app_write_refused"},
		} {
			t.Run(c.name, func(t *testing.T) {
				args := map[string]any{"action": c.action, "owner": "octo", "repo": "hello"}
				if c.want != "" {
					// Refused before the arguments are checked.
					args["title"], args["issue_number"], args["pull_number"] = "x", 1, 1
				}
				res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Meta: c.meta, Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				if got := errorCode(res); got != c.want {
					t.Errorf("%s %s: code %q, want %q (%s)", c.tool, c.action, got, c.want, resultText(t, res))
				}
			})
		}
		if n := gh.writes.Load() - before; n != 0 {
			t.Errorf("the upstream was sent %d writes from a view", n)
		}
		// The same call unmarked is the agent's: it goes through.
		if res := callTool(t, sess, "issues", map[string]any{"action": "list", "owner": "octo", "repo": "hello"}); res.IsError {
			t.Errorf("agent list refused: %s", resultText(t, res))
		}
	})
}

// sameList reports whether v is the JSON list of want.
func sameList(v any, want ...string) bool {
	l, ok := v.([]any)
	if !ok || len(l) != len(want) {
		return false
	}
	return slices.EqualFunc(l, want, func(a any, b string) bool { return a == b })
}

// lastMessage is a JSON-RPC answer's message: the body, or the last data
// line of an event stream.
func lastMessage(body []byte) []byte {
	for line := range strings.Lines(string(body)) {
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			body = []byte(data)
		}
	}
	return body
}
