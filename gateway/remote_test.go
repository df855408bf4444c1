package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/tenants"
)

// serverEverythingVersion is the @modelcontextprotocol/server-everything
// release the remote MCP tests run against.
const serverEverythingVersion = "2026.8.31"

const everythingManifest = `{
  "id": "everything", "name": "Everything", "version": "1.0.0", "type": "mcp_remote", "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [
    {"name": "MCP_URL", "label": "MCP server URL", "required": true},
    {"name": "API_KEY", "label": "API key", "required": true, "secret": true}
  ],
  "mcp_config": {"url": "{ENV:MCP_URL}/mcp", "headers": {"X-Api-Key": "{SECRET:API_KEY}"}}
}`

var (
	everythingOnce sync.Once
	everythingURL  string
	everythingErr  error
	everythingSkip string
)

// serverEverything starts @modelcontextprotocol/server-everything on a
// free loopback port (once per test binary) and returns its base URL. It
// is installed with npm into a cache folder, once. Without node or npm
// the test is skipped, unless CI is "true".
func serverEverything(t *testing.T) string {
	t.Helper()
	everythingOnce.Do(func() { everythingURL, everythingSkip, everythingErr = startServerEverything() })
	switch {
	case everythingSkip != "" && os.Getenv("CI") == "true":
		t.Fatalf("server-everything is required in CI: %s", everythingSkip)
	case everythingSkip != "":
		t.Skipf("skipping: %s", everythingSkip)
	case everythingErr != nil:
		t.Fatalf("starting server-everything: %v", everythingErr)
	}
	return everythingURL
}

// everythingProc is the server process, killed when the tests end.
var everythingProc *exec.Cmd

func TestMain(m *testing.M) {
	code := m.Run()
	if everythingProc != nil && everythingProc.Process != nil {
		syscall.Kill(-everythingProc.Process.Pid, syscall.SIGKILL)
		everythingProc.Wait()
	}
	os.Exit(code)
}

func startServerEverything() (string, string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", "node is not installed", nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "", err
	}
	home := filepath.Join(cache, "switchboard-test", "server-everything")
	script := filepath.Join(home, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return "", "npm is not installed", nil
		}
		if err := os.MkdirAll(home, 0o755); err != nil {
			return "", "", err
		}
		if err := os.WriteFile(filepath.Join(home, "package.json"), []byte(`{"name":"switchboard-test-server-everything","private":true}`), 0o644); err != nil {
			return "", "", err
		}
		cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "--loglevel=error",
			"@modelcontextprotocol/server-everything@"+serverEverythingVersion)
		cmd.Dir = home
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", errors.New("npm install: " + err.Error() + ": " + string(out))
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, script, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	everythingProc = cmd
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond); err == nil {
			c.Close()
			return base, "", nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", "", errors.New("server-everything did not listen within 20 s")
}

// countingProxy is a loopback reverse proxy in front of the remote server:
// it counts the requests that reach it and refuses a wrong API key.
type countingProxy struct {
	*httptest.Server
	hits atomic.Int64
}

func newCountingProxy(t *testing.T, target, key string) *countingProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	p := &countingProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		if r.Header.Get("X-Api-Key") != key {
			http.Error(w, `{"error":"bad key"}`, http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// agentClient connects to a Switchboard instance with the official SDK
// client, as an agent.
func agentClient(ctx context.Context, s *stack, instance, token, agent string) (*sdk.ClientSession, error) {
	hc := &http.Client{Transport: &agentTransport{token: token, agent: agent}}
	c := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: s.srv.URL + "/workspaces/acme/webhooks/" + instance + ".mcp", HTTPClient: hc, MaxRetries: -1,
	}, nil)
}

type agentTransport struct{ token, agent string }

func (a *agentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	r.Header.Set("X-Agent-Id", a.agent)
	return http.DefaultTransport.RoundTrip(r)
}

func TestRemoteMCP(t *testing.T) {
	t.Parallel()
	upstream := serverEverything(t)
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		const key = "canary-remote-41c9e2-KEY"
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		proxy := newCountingProxy(t, upstream, key)
		cat := registrytest.Load(t, map[string]string{"everything/connector.json": everythingManifest})
		s := newStack(t, db, cat, &clock{})
		s.tenant(t, "acme")
		v, _, err := s.svc.Install(ctx, "acme", "ev", tenants.InstallRequest{ConnectorID: "everything", AuthMode: "apiKey",
			Fields: fieldsOf(map[string]string{"MCP_URL": proxy.URL, "API_KEY": key}), Agents: []string{"agent-1"}})
		if err != nil {
			t.Fatalf("Install: %v", err)
		}
		if v.AuthState != tenants.AuthUnverified {
			t.Errorf("auth_state = %s", v.AuthState)
		}
		if proxy.hits.Load() != 0 {
			t.Errorf("installing contacted the remote server")
		}
		token := s.caller(t, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})

		t.Run("lists and calls through Switchboard", func(t *testing.T) {
			sess, err := agentClient(ctx, s, "ev", token, "agent-1")
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer sess.Close()
			tools, err := sess.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			found := false
			for _, tool := range tools.Tools {
				found = found || tool.Name == "echo"
			}
			if !found || len(tools.Tools) < 3 {
				t.Fatalf("tools = %d, echo found %v", len(tools.Tools), found)
			}
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello remote"}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			text := ""
			for _, c := range res.Content {
				if tc, ok := c.(*sdk.TextContent); ok {
					text += tc.Text
				}
			}
			if res.IsError || !strings.Contains(text, "hello remote") {
				t.Errorf("echo = %+v %q", res, text)
			}
			// A hosted server that echoes the instance's key passes it on redacted.
			res, err = sess.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "key " + key}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if b, _ := json.Marshal(res); strings.Contains(string(b), key) || !strings.Contains(string(b), "[REDACTED]") {
				t.Errorf("echoed key = %s", b)
			}
			// A second list is served from the cache: no new remote request.
			n := proxy.hits.Load()
			if _, err := sess.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if proxy.hits.Load() != n {
				t.Errorf("tools/list went to the remote server again")
			}
			// An unknown remote tool is the remote's refusal, classified.
			res, err = sess.CallTool(ctx, &sdk.CallToolParams{Name: "no-such-tool", Arguments: map[string]any{}})
			if err != nil || !res.IsError {
				t.Errorf("unknown tool = %+v, %v", res, err)
			}
		})

		t.Run("resources and prompts forwarded", func(t *testing.T) {
			sess, err := agentClient(ctx, s, "ev", token, "agent-1")
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer sess.Close()
			rl, err := sess.ListResources(ctx, nil)
			if err != nil || len(rl.Resources) == 0 {
				t.Fatalf("resources/list: %v", err)
			}
			rr, err := sess.ReadResource(ctx, &sdk.ReadResourceParams{URI: rl.Resources[0].URI})
			if err != nil || len(rr.Contents) == 0 {
				t.Errorf("resources/read: %v", err)
			}
			if _, err := sess.ListResourceTemplates(ctx, nil); err != nil {
				t.Errorf("resources/templates/list: %v", err)
			}
			pl, err := sess.ListPrompts(ctx, nil)
			if err != nil || len(pl.Prompts) == 0 {
				t.Fatalf("prompts/list: %v", err)
			}
			// An unknown resource is the remote's refusal, typed.
			if _, err := sess.ReadResource(ctx, &sdk.ReadResourceParams{URI: "demo://no/such/resource"}); err == nil {
				t.Error("an unknown resource was read")
			}
		})

		t.Run("agent not on the allowlist reaches nothing", func(t *testing.T) {
			before := proxy.hits.Load()
			sess, err := agentClient(ctx, s, "ev", token, "intruder")
			if err == nil {
				if _, err = sess.ListTools(ctx, nil); err == nil {
					t.Error("tools/list succeeded for an agent not on the allowlist")
				}
				if _, err = sess.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err == nil {
					t.Error("tools/call succeeded for an agent not on the allowlist")
				}
				sess.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "agent_not_allowed") && !strings.Contains(err.Error(), "Forbidden") {
				t.Errorf("err = %v", err)
			}
			if got := proxy.hits.Load(); got != before {
				t.Errorf("the remote server saw %d request(s) of a refused agent", got-before)
			}
		})

		t.Run("audited", func(t *testing.T) {
			s.audit.Flush(ctx)
			ten, _ := s.svc.Tenant(ctx, "acme")
			list, err := s.astore.List(ctx, ten.ID, audit.Query{})
			if err != nil {
				t.Fatal(err)
			}
			ok := false
			for _, e := range list {
				ok = ok || e.Tool == "echo" && e.Agent == "agent-1" && e.Outcome == "ok"
			}
			if !ok {
				t.Errorf("no audit row for the echo call: %+v", list)
			}
		})

		t.Run("a changed instance drops its session", func(t *testing.T) {
			if _, _, err := s.svc.Install(ctx, "acme", "ev", tenants.InstallRequest{ConnectorID: "everything", AuthMode: "apiKey",
				Fields: fieldsOf(map[string]string{"API_KEY": "wrong-key"}), Agents: []string{"agent-1"}}); err != nil {
				t.Fatal(err)
			}
			sess, err := agentClient(ctx, s, "ev", token, "agent-1")
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}})
			if err != nil || !res.IsError {
				t.Fatalf("call with a wrong key = %+v, %v", res, err)
			}
			sc, _ := res.StructuredContent.(map[string]any)
			e, _ := sc["error"].(map[string]any)
			if e["code"] != "reconnect_required" {
				t.Errorf("error = %v", sc)
			}
		})

		if strings.Contains(s.logs.String(), key) || strings.Contains(s.bodies.String(), key) {
			t.Error("the remote API key leaked into logs or bodies")
		}
	})
}
