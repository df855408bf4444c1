package gateway_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

const crmManifest = `{
  "id": "crm", "name": "CRM", "version": "1.0.0", "type": "openapi", "scope": "global",
  "auth": {"type": "oauth2", "modes": ["apiKey", "clientCredentials", "oauth", "oauthCentral", "jwt"],
           "delivery": "header", "param": "X-Api-Key", "field": "API_KEY", "provider": "testidp", "scopes": ["contacts.read"]},
  "env": [
    {"name": "API_URL", "label": "API URL", "required": true},
    {"name": "API_KEY", "label": "API key", "secret": true},
    {"name": "CLIENT_ID", "label": "Client id"},
    {"name": "CLIENT_SECRET", "label": "Client secret", "secret": true},
    {"name": "AUTHORIZE_URL", "label": "Authorize URL"},
    {"name": "TOKEN_URL", "label": "Token URL"},
    {"name": "REVOKE_URL", "label": "Revoke URL"},
    {"name": "SCOPES", "label": "Scopes"},
    {"name": "JWT_ISSUER", "label": "Issuer"},
    {"name": "PRIVATE_KEY", "label": "Private key", "secret": true}
  ],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}",
  "verify": {"probe": {"operation": "getMe"}}
}`

const crmSpec = `{
  "openapi": "3.0.3", "info": {"title": "CRM", "version": "1"},
  "paths": {"/me": {"get": {"operationId": "getMe", "x-entity": "me", "x-action": "get", "summary": "Who am I",
     "responses": {"200": {"description": "ok"}}}}}
}`

func loadCRM(t testing.TB) *registry.Catalog {
	t.Helper()
	return registrytest.Load(t, map[string]string{"crm/connector.json": crmManifest, "crm/openapi.json": crmSpec})
}

// clock is a shared, adjustable clock: tests expire tokens by moving it.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().UTC().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// upstream is the vendor API: it accepts the API key "good-key" or a
// bearer token the authorization server validates, and says whose.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
	// memo, when set (benchmarks), remembers validated bearer tokens so
	// that the upstream's own cost is the same for keys and tokens.
	memo *sync.Map
}

func (u *upstream) memoized(r *http.Request) (string, bool) {
	if u.memo == nil {
		return "", false
	}
	v, ok := u.memo.Load(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	return v.(string), true
}

func newUpstream(t testing.TB, as *authztest.Server) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.RawQuery, "targetUserId") {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"message":"targetUserId leaked"}`)
			return
		}
		who := ""
		if r.Header.Get("X-Api-Key") == "good-key" {
			who = "api-key"
		} else if v, ok := u.memoized(r); ok {
			who = v
		} else if sub, ok := as.Validate(r); ok {
			who = sub
			if u.memo != nil {
				u.memo.Store(r.Header.Get("Authorization"), sub)
			}
		}
		if who == "" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message":"bad credentials"}`)
			return
		}
		fmt.Fprintf(w, `{"user": %q}`, who)
	}))
	t.Cleanup(u.Close)
	return u
}

// stack is one Switchboard server in process (one replica).
type stack struct {
	db     *database.DB
	svc    *tenants.Service
	gw     *gateway.Gateway
	oauth  *auth.OAuth
	prov   *auth.Providers
	audit  *audit.Writer
	astore *audit.Store
	srv    *httptest.Server
	logs   *logtest.Buffer
	bodies *logtest.Buffer
	// members is the server's store of members and sessions.
	members *members.Store
}

func newStack(t testing.TB, db *database.DB, cat *registry.Catalog, clk *clock) *stack {
	t.Helper()
	return newStackWith(t, db, cat, clk, nil)
}

// newStackWith is newStack with the server's configuration changed by
// configure (nil changes nothing).
func newStackWith(t testing.TB, db *database.DB, cat *registry.Catalog, clk *clock, configure func(*server.Config)) *stack {
	t.Helper()
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := server.Config{DB: db, ConnectorCatalog: cat, Logger: logger, Now: clk.now,
		Audit: audit.WriterOptions{Interval: 20 * time.Millisecond}}
	if configure != nil {
		configure(&cfg)
	}
	srv := servertest.Start(t, cfg)
	return &stack{db: db, svc: srv.Tenants(), gw: srv.Gateway(), oauth: srv.OAuth(), prov: srv.Providers(),
		audit: srv.Audit(), astore: srv.AuditStore(), srv: srv.HTTP, logs: logs, bodies: &logtest.Buffer{},
		members: srv.Members()}
}

func (s *stack) tenant(t testing.TB, slug string) {
	t.Helper()
	if _, err := s.svc.CreateTenant(context.Background(), slug, slug); err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
}

func (s *stack) install(t testing.TB, tenant, instance, mode string, fields map[string]string, agents ...string) {
	t.Helper()
	f := map[string]*secrets.Secret{}
	for k, v := range fields {
		sv := secrets.New(v)
		f[k] = &sv
	}
	if _, _, err := s.svc.Install(context.Background(), tenant, instance, tenants.InstallRequest{
		ConnectorID: "crm", AuthMode: mode, Fields: f, Agents: agents}); err != nil {
		t.Fatalf("Install: %v", err)
	}
}

func (s *stack) caller(t testing.TB, tenant string, req tenants.CallerRequest) string {
	t.Helper()
	_, tok, err := s.svc.CreateCaller(context.Background(), tenant, req)
	if err != nil {
		t.Fatalf("CreateCaller: %v", err)
	}
	return tok.Reveal()
}

// toolResult is a tools/call answer.
type toolResult struct {
	status  int
	isError bool
	code    string
	message string
	user    string
	raw     string
	// connectURL is a reconnect_required error's connect link.
	connectURL string
}

// callTool sends one tools/call of the "me" tool as a caller.
func (s *stack) callTool(t testing.TB, tenant, instance, token, agent, user string, args map[string]any, meta map[string]any) toolResult {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	args["action"] = "get"
	params := map[string]any{"name": "me", "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/workspaces/"+tenant+"/webhooks/"+instance+".mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Agent-Id", agent)
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return toolResult{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s.bodies.Write(b)
	out := toolResult{status: resp.StatusCode, raw: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// An instance proxying an MCP server answers in an event stream:
		// the response is its last message.
		for line := range strings.Lines(string(b)) {
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && strings.Contains(data, `"id"`) {
				b = []byte(data)
			}
		}
	}
	var rpc struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
		Error struct {
			Data struct {
				Code string `json:"code"`
			} `json:"data"`
		} `json:"error"`
	}
	json.Unmarshal(b, &rpc)
	out.isError = rpc.Result.IsError
	out.code = rpc.Error.Data.Code
	sc := rpc.Result.StructuredContent
	if e, ok := sc["error"].(map[string]any); ok {
		out.code, _ = e["code"].(string)
		out.message, _ = e["message"].(string)
		out.connectURL, _ = e["connectUrl"].(string)
	}
	out.user, _ = sc["user"].(string)
	return out
}

// browser is an end user's browser: a cookie jar, and a login at the
// authorization server.
type browser struct {
	client *http.Client
	user   string
}

type loginTransport struct {
	user   string
	as     string
	extra  map[string]string
	bodies *logtest.Buffer
}

func (l *loginTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if strings.HasPrefix(r.URL.String(), l.as) {
		r.Header.Set(authztest.LoginHeader, l.user)
	} else {
		for k, v := range l.extra {
			r.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if l.bodies != nil {
		l.bodies.Write(b)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// newBrowser returns user's browser; requests to Switchboard carry the
// caller credential (the platform's session stand-in).
func (s *stack) newBrowser(as *authztest.Server, user, callerToken string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{user: user, client: &http.Client{Jar: jar, Transport: &loginTransport{user: user, as: as.URL, bodies: s.bodies,
		extra: map[string]string{"Authorization": "Bearer " + callerToken, "X-User-Id": user}}}}
}

// connect runs the whole consent flow in b and returns the final status
// and page.
func (s *stack) connect(t testing.TB, b *browser, tenant, instance string) (int, string) {
	t.Helper()
	resp, err := b.client.Get(s.srv.URL + "/workspaces/" + tenant + "/webhooks/" + instance + "/oauth/connect?redirect=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// startFlow calls connect without following redirects and returns the
// authorize URL.
func (s *stack) startFlow(t testing.TB, b *browser, tenant, instance string) string {
	t.Helper()
	c := *b.client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(s.srv.URL + "/workspaces/" + tenant + "/webhooks/" + instance + "/oauth/connect?redirect=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("connect = %d", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

// authorizeOnly sends b to the authorize URL and returns the callback URL
// the server redirects to, without following it.
func authorizeOnly(t testing.TB, b *browser, authorizeURL string) string {
	t.Helper()
	c := *b.client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(authorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if loc == "" {
		t.Fatalf("authorize = %d without a redirect", resp.StatusCode)
	}
	return loc
}

func get(t testing.TB, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func ecKey(t testing.TB) (*ecdsa.PrivateKey, string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return k, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// oauthFields are the fields of an oauth instance against as.
func oauthFields(as *authztest.Server, up *upstream, clientID, secret string) map[string]string {
	return map[string]string{"API_URL": up.URL, "CLIENT_ID": clientID, "CLIENT_SECRET": secret,
		"AUTHORIZE_URL": as.AuthorizeURL(), "TOKEN_URL": as.TokenURL(), "REVOKE_URL": as.RevokeURL()}
}

func redirectFor(s *stack, tenant, instance string) string {
	return s.srv.URL + "/workspaces/" + tenant + "/webhooks/" + instance + "/oauth/callback"
}

// headerPlatform is a trusted agent platform that asserts its users with
// X-User-Id (user mode header), allowed to name users: the tests' users
// are its external subjects.
func headerPlatform(users ...string) tenants.CallerRequest {
	return tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform, Trusted: true,
		UserMode: tenants.UserHeader, ExternalSubjects: users}
}
