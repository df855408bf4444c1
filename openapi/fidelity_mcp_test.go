package openapi_test

// The fidelity test again, through the whole agent path: each vendor
// description becomes a generated connector package in a catalog, a
// tenant installs it, and an agent calls every operation with MCP
// tools/call (the official Go SDK client) over the MCP endpoint, the
// gateway and the guarded egress client, to the validating upstream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/knowledge"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/fidelity"
	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
)

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
func mcpSession(t *testing.T, cat *registry.Catalog, conn *registry.Connector, upstream string) (*sdk.ClientSession, wire) {
	t.Helper()
	ctx := context.Background()
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t), ConnectorCatalog: cat})
	tok, err := fidelity.Install(ctx, srv.Tenants(), "acme", conn.Manifest, upstream)
	if err != nil {
		t.Fatalf("installing the connector: %v", err)
	}
	sess, err := fidelity.Connect(ctx, srv.URL, "acme", tok, http.DefaultTransport)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess, wire{endpoint: fidelity.Endpoint(srv.URL, "acme"), token: tok.Reveal()}
}

// wire is how to reach an instance's MCP endpoint with raw requests.
type wire struct{ endpoint, token string }

// protocolVersions are the MCP revisions a client may speak ("" sends no
// version header).
var protocolVersions = []string{"", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// toolsListBytes is the size of the HTTP body a client of each protocol
// version receives for tools/list: exactly what it reads off the wire.
func toolsListBytes(t *testing.T, w wire) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, v := range protocolVersions {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		if v == "2026-07-28" {
			body = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		}
		req, _ := http.NewRequest(http.MethodPost, w.endpoint, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+w.token)
		req.Header.Set("X-Agent-Id", fidelity.Agent)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if v != "" {
			req.Header.Set("MCP-Protocol-Version", v)
		}
		if v == "2026-07-28" {
			req.Header.Set("Mcp-Method", "tools/list")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("tools/list %s: %v", v, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"tools"`) {
			t.Fatalf("tools/list %s: %d %.200s", v, resp.StatusCode, b)
		}
		out[v] = len(b)
	}
	return out
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
			o := exercise(t, c, func(cl fidelity.Call, baseURL string) error {
				if sess == nil {
					var w wire
					sess, w = mcpSession(t, cat, conn, baseURL)
					checkToolsList(t, sess, conn.Spec)
					for v, n := range toolsListBytes(t, w) {
						if n > openapi.ToolsBudget {
							t.Errorf("tools/list for protocol version %q is %d bytes on the wire, over %d", v, n, openapi.ToolsBudget)
						}
						t.Logf("tools/list wire bytes, version %q: %d", v, n)
					}
				}
				if cl.OwnServer {
					// The gateway would send it to the vendor's own host:
					// never leave loopback.
					return fidelity.ErrSkip
				}
				args := map[string]any{"action": cl.Action}
				for k, x := range cl.Args {
					args[k] = x
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: cl.Entity, Arguments: args})
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
	want := len(api.Entities)
	if slices.ContainsFunc(list.Tools, func(tl *sdk.Tool) bool { return tl.Name == knowledge.ToolName }) {
		want++ // a knowledge source's access check: the generator proposed one
	}
	if len(list.Tools) != want || len(list.Tools) > openapi.MaxEntities {
		t.Errorf("%d tools, want %d (at most %d)", len(list.Tools), want, openapi.MaxEntities)
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

// wideDescription is a description written for TestToolsListWireBudget:
// 40 tags of one operation each, every operation with k described query
// parameters (descriptions padded by pad bytes), so that its tools/list lands anywhere near the budget.
func wideDescription(k, pad int) []byte {
	var paths []string
	for i := range 40 {
		var params []string
		for j := range k {
			params = append(params, fmt.Sprintf(`{"name": "filter_%d", "in": "query", "description": "Only the records whose field %d matches; several values are separated by commas%s.", "schema": {"type": "string", "maxLength": 64}}`, j, j, strings.Repeat("!", pad)))
		}
		paths = append(paths, fmt.Sprintf(`"/area%d/records": {"get": {"operationId": "listArea%dRecords", "tags": ["area%d"], "summary": "List the records of area %d", "parameters": [%s],
  "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object", "properties": {"data": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}}}}}}}}}}`,
			i, i, i, i, strings.Join(params, ", ")))
	}
	return []byte(`{"openapi": "3.0.3", "info": {"title": "Wide", "version": "1", "description": "Forty areas of records."},
  "servers": [{"url": "https://api.example.test"}], "security": [{"bearer": []}],
  "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
  "paths": {` + strings.Join(paths, ",\n") + `}}`)
}

// TestToolsListWireBudget (issue 14 class 12): the tools/list a client
// receives, measured on the wire for every protocol version (envelope,
// the SDK's per-tool additions, outputSchema), stays within ToolsBudget
// for the description whose compiled tools/list comes closest to it, and
// ToolsListBound, which generate and lint report, is an upper bound.
func TestToolsListWireBudget(t *testing.T) {
	t.Parallel()
	best, bestPad, bestSize := -1, 0, 0
	for k := 1; k <= 12; k++ {
		for pad := 0; pad < 40; pad += 3 {
			r, err := openapi.Analyze(wideDescription(k, pad), nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := openapi.ToolsListBound(r.Spec); n > openapi.ToolsBudget {
				t.Errorf("k=%d pad=%d: tools/list bound %d over the budget", k, pad, n)
			}
			if n := r.Spec.ToolsListSize(); n > bestSize {
				best, bestPad, bestSize = k, pad, n
			}
		}
	}
	spec := wideDescription(best, bestPad)
	r, err := openapi.Analyze(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, conn := catalogOf(t, &compiled{spec: spec, result: r}, "wide.json")
	_, w := mcpSession(t, cat, conn, "http://127.0.0.1:9")
	bound := openapi.ToolsListBound(conn.Spec)
	for v, n := range toolsListBytes(t, w) {
		t.Logf("k=%d: version %q: %d bytes on the wire (ToolsJSON %d, bound %d)", best, v, n, bestSize, bound)
		if n > openapi.ToolsBudget || n > bound {
			t.Errorf("version %q: tools/list is %d bytes on the wire; budget %d, bound %d", v, n, openapi.ToolsBudget, bound)
		}
	}
}

// TestDescribeBounded (issue 14 class 11): describe of an action whose
// input schema is far over MaxDescribeBytes answers within the bound
// through MCP, showing the top of the schema and naming, for each part
// left out, the JSON pointer that describes it; describe with that path
// answers that part, within the bound too; a path to nothing is refused.
func TestDescribeBounded(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile("testdata/deepschema.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := openapi.Analyze(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	op, _ := r.Spec.Operation("createReport")
	if whole, _ := json.Marshal(op.InputSchema); len(whole) < 3*registry.MaxDescribeBytes {
		t.Fatalf("the fixture's schema is only %d bytes", len(whole))
	}
	cat, conn := catalogOf(t, &compiled{spec: spec, result: r}, "deepschema.yaml")
	sess, _ := mcpSession(t, cat, conn, "http://127.0.0.1:9")
	if _, err := sess.ListTools(context.Background(), nil); err != nil { // the client learns the x-mcp-header of target
		t.Fatal(err)
	}
	entity, action := conn.Spec.Entities[0].Name, conn.Spec.Entities[0].Actions[0].Name
	describe := func(path string) (*sdk.CallToolResult, string) {
		args := map[string]any{"action": registry.DescribeAction, registry.DescribeTarget: action}
		if path != "" {
			args[registry.DescribePath] = path
		}
		res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: entity, Arguments: args})
		if err != nil {
			t.Fatalf("describe %q: %v", path, err)
		}
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text += tc.Text
			}
		}
		return res, text
	}
	res, text := describe("")
	if res.IsError || len(text) > registry.MaxDescribeBytes {
		t.Fatalf("describe: error %v, %d bytes", res.IsError, len(text))
	}
	stub := regexp.MustCompile(`"x-describe-path":"([^"]+)"`).FindStringSubmatch(text)
	if stub == nil || !strings.Contains(text, `"section0"`) {
		t.Fatalf("describe shows no top-level section or no path to a part left out: %.400s", text)
	}
	res, text = describe(stub[1])
	if res.IsError || len(text) > registry.MaxDescribeBytes || !strings.Contains(text, `"schemaPath":"`+stub[1]+`"`) || !strings.Contains(text, `"properties"`) {
		t.Errorf("describe path %s: error %v, %d bytes: %.300s", stub[1], res.IsError, len(text), text)
	}
	if res, text = describe("/properties/nowhere"); !res.IsError || !strings.Contains(text, "no schema at path") {
		t.Errorf("describe of a path to nothing: %v %.200s", res.IsError, text)
	}
}

// TestBinaryAnswerAsResource (issue 14 class 9, the answer side): a binary
// upstream answer reaches the agent through MCP as an embedded resource
// with its media type and exact bytes, and a line saying its type and
// size, never as text.
func TestBinaryAnswerAsResource(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile("testdata/mediatypes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := openapi.Analyze(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	pdf := []byte("%PDF-1.7\n\x00\xff\xfe binary \x01\x02")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(pdf)
	}))
	defer upstream.Close()
	cat, conn := catalogOf(t, &compiled{spec: spec, result: r}, "mediatypes.yaml")
	sess, _ := mcpSession(t, cat, conn, upstream.URL)
	if _, err := sess.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	var entity, action string
	for _, e := range conn.Spec.Entities {
		for _, a := range e.Actions {
			if a.Op.ID == "getReport" {
				entity, action = e.Name, a.Name
			}
		}
	}
	res, err := sess.CallTool(context.Background(), &sdk.CallToolParams{Name: entity, Arguments: map[string]any{"action": action, "id": "7"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, toolText(res))
	}
	var found bool
	for _, c := range res.Content {
		if er, ok := c.(*sdk.EmbeddedResource); ok {
			found = true
			if er.Resource.MIMEType != "application/pdf" || !bytes.Equal(er.Resource.Blob, pdf) {
				t.Errorf("resource %s with %d bytes, want application/pdf with %d", er.Resource.MIMEType, len(er.Resource.Blob), len(pdf))
			}
		}
	}
	if text := toolText(res); !found || !strings.Contains(text, `"mediaType":"application/pdf"`) || !strings.Contains(text, fmt.Sprintf(`"bytes":%d`, len(pdf))) || strings.Contains(text, "PDF-1.7") {
		t.Errorf("answer: resource %v, text %s", found, text)
	}
}
