package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
)

// The oauth connector the replica test installs: one "me" operation.
var replicaCatalog = map[string]string{
	"crm/connector.json": `{
  "id": "crm", "name": "CRM", "version": "1.0.0", "type": "openapi", "scope": "global", "requires": ["OAUTH"],
  "auth": {"type": "oauth2", "modes": ["oauth"], "provider": "testidp", "scopes": ["contacts.read"]},
  "docs": {"llm_short_description": "A CRM."},
  "env": [
    {"name": "API_URL", "label": "API URL", "required": true},
    {"name": "CLIENT_ID", "label": "Client id"},
    {"name": "CLIENT_SECRET", "label": "Client secret", "secret": true},
    {"name": "AUTHORIZE_URL", "label": "Authorize URL"},
    {"name": "TOKEN_URL", "label": "Token URL"},
    {"name": "REVOKE_URL", "label": "Revoke URL"}
  ],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`,
	"crm/openapi.json": `{"openapi": "3.0.3", "info": {"title": "CRM", "version": "1"},
  "paths": {"/me": {"get": {"operationId": "getMe", "x-entity": "me", "x-action": "get", "summary": "Who am I",
     "responses": {"200": {"description": "ok"}}}}}}`,
}

// replica is one `switchboard serve` process.
type replica struct {
	url  string
	logs *logtest.Buffer
	cmd  *exec.Cmd
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startReplica(t *testing.T, bin string, env []string, args ...string) *replica {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr}, args...)...)
	r := &replica{url: "http://" + addr, logs: &logtest.Buffer{}, cmd: cmd}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(r.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return r
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("replica at %s not ready: %s", r.url, r.logs.String())
	return nil
}

// Two server processes on one Postgres database, 25 concurrent calls each
// with an expired access token: exactly one refresh at the authorization
// server in total, 50 successes, and neither process sees invalid_grant.
// Then a caller revoked through one process is refused by the other.
func TestTwoProcessesRefreshOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts two processes")
	}
	dsn := dbtest.PostgresURL(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cat := registrytest.Write(t, replicaCatalog)
	migrateCmd := exec.Command(bin, "migrate")
	migrateCmd.Env = append(os.Environ(), "SWITCHBOARD_DATABASE_URL="+dsn)
	if out, err := migrateCmd.CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}

	// Access tokens live 40 s; the server counts a token stale 30 s before
	// its expiry, so a token is fresh for 10 s after it is issued.
	as := authztest.New(t, authztest.Options{AccessTokenLifespan: 12 * time.Second})
	upstream := httptest.NewServer(meUpstream(as))
	defer upstream.Close()

	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	env := append(os.Environ(), "SWITCHBOARD_MASTER_KEY="+key, "SWITCHBOARD_ADMIN_TOKEN="+operatorToken, "SWITCHBOARD_DATABASE_URL="+dsn)
	common := []string{"--catalog", cat, "--allow-upstream-cidrs", "127.0.0.1/32", "--data-dir", dir}
	a := startReplica(t, bin, env, common...)
	b := startReplica(t, bin, env, common...)

	admin := func(method, path, body string) map[string]any { return operatorRequest(t, a.url, method, path, body) }
	redirect := a.url + "/workspaces/acme/webhooks/crm/oauth/callback"
	as.AddClient(authztest.Client{ID: "crm-app", Secret: "crm-secret", RedirectURIs: []string{redirect}, Scopes: []string{"contacts.read"}})
	admin("POST", "/v1/tenants", `{"slug": "acme"}`)
	admin("PUT", "/v1/tenants/acme/instances/crm", fmt.Sprintf(`{"connector_id": "crm", "auth_mode": "oauth", "agents": ["bot"],
		"fields": {"API_URL": %q, "CLIENT_ID": "crm-app", "CLIENT_SECRET": "crm-secret",
		"AUTHORIZE_URL": %q, "TOKEN_URL": %q, "REVOKE_URL": %q}}`, upstream.URL, as.AuthorizeURL(), as.TokenURL(), as.RevokeURL()))
	token, _ := admin("POST", "/v1/tenants/acme/callers", `{"name": "platform", "kind": "agent-platform", "trusted": true, "user_mode": "header", "external_subjects": ["alice"]}`)["token"].(string)

	// alice connects through replica A in her browser.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		if strings.HasPrefix(r.URL.String(), as.URL) {
			r.Header.Set(authztest.LoginHeader, "alice")
		} else {
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("X-User-Id", "alice")
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	resp, err := browser.Get(a.url + "/workspaces/acme/webhooks/crm/oauth/connect?redirect=1")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "Connected") {
		t.Fatalf("connect = %d %s", resp.StatusCode, page)
	}
	issued := time.Now()

	call := func(r *replica) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"me","arguments":{"action":"get"}}}`
		req, _ := http.NewRequest("POST", r.url+"/workspaces/acme/webhooks/crm.mcp", strings.NewReader(body))
		for k, v := range map[string]string{"Authorization": "Bearer " + token, "X-Agent-Id": "bot", "X-User-Id": "alice",
			"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}
	// Warm both replicas while the token is fresh: no refresh yet.
	for _, r := range []*replica{a, b} {
		if out := call(r); !strings.Contains(out, `\"user\": \"alice\"`) && !strings.Contains(out, `"user":"alice"`) {
			t.Fatalf("warm call: %s", out)
		}
	}
	// Let the access token go stale everywhere: a 12 s token is refreshed
	// in the last tenth of its life.
	time.Sleep(time.Until(issued.Add(11*time.Second + 300*time.Millisecond)))
	before := as.TokenRequests("refresh_token")
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok       int
		failures []string
	)
	for _, r := range []*replica{a, b} {
		for range 25 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := call(r)
				mu.Lock()
				defer mu.Unlock()
				if strings.Contains(out, `"user":"alice"`) && !strings.Contains(out, `"isError":true`) {
					ok++
				} else {
					failures = append(failures, out)
				}
			}()
		}
	}
	wg.Wait()
	if ok != 50 {
		t.Errorf("successes = %d, want 50; failures: %.2000s", ok, strings.Join(failures, "\n"))
	}
	if n := as.TokenRequests("refresh_token") - before; n != 1 {
		t.Errorf("refresh requests at the authorization server = %d, want exactly 1", n)
	}
	for name, r := range map[string]*replica{"A": a, "B": b} {
		if l := r.logs.String(); strings.Contains(l, "invalid_grant") || strings.Contains(l, "grant needs reconnecting") {
			t.Errorf("replica %s saw invalid_grant or reconnect:\n%s", name, l)
		}
	}

	// A caller revoked through replica A is refused by replica B, whose
	// cache held it, as soon as the change notification arrives.
	list := admin("GET", "/v1/tenants/acme/callers", "")
	callers, _ := list["callers"].([]any)
	if len(callers) != 1 {
		t.Fatalf("callers = %v", list)
	}
	id, _ := callers[0].(map[string]any)["id"].(string)
	admin("DELETE", "/v1/tenants/acme/callers/"+id, "")
	refused := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out := call(b); strings.Contains(out, "invalid_credential") || strings.Contains(out, "unauthorized") {
			refused = true
			break
		}
	}
	if !refused {
		t.Errorf("replica B still serves a caller revoked through replica A")
	}
}

// operatorRequest sends an operator-token request to the server at base
// and returns its decoded JSON answer, failing the test on a status >= 300.
func operatorRequest(t *testing.T, base, method, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, out)
	}
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	return m
}

// meUpstream is the crm connector's API: GET /me answers the user of the
// access token, which the authorization server validates.
func meUpstream(as *authztest.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub, ok := as.Validate(r)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message": "bad token"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"user": %q}`, sub)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
