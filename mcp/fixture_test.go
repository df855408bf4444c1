package mcp_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/switchboardhq/switchboard/admission"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

const widgetsManifest = `{
  "id": "widgets",
  "name": "Widgets",
  "version": "1.0.0",
  "type": "openapi",
  "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey", "accessToken", "oauth"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY", "token_field": "API_KEY"},
  "docs": {"llm_short_description": "Widgets: list, get, create and delete widgets."},
  "env": [
    {"name": "API_URL", "label": "API URL", "required": true},
    {"name": "API_KEY", "label": "API key", "required": true, "secret": true}
  ],
  "openapi": "openapi.json",
  "base_url": "{ENV:API_URL}"
}
`

const widgetsSpec = `{
  "openapi": "3.0.3",
  "info": {"title": "Widgets", "version": "1"},
  "servers": [{"url": "https://widgets.example.test"}],
  "paths": {
    "/widgets": {
      "get": {
        "operationId": "listWidgets", "x-entity": "widgets", "x-action": "list",
        "summary": "List widgets",
        "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/WidgetOut"}}}}}}
      },
      "post": {
        "operationId": "createWidget", "x-entity": "widgets", "x-action": "create",
        "summary": "Create a widget",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Widget"}}}},
        "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WidgetOut"}}}}}
      }
    },
    "/widgets/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "get": {
        "operationId": "getWidget", "x-entity": "widgets", "x-action": "get",
        "summary": "Get a widget",
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WidgetOut"}}}}}
      },
      "delete": {
        "operationId": "deleteWidget", "x-entity": "widgets", "x-action": "delete",
        "summary": "Delete a widget",
        "responses": {"204": {"description": "gone"}}
      }
    },
    "/status": {
      "get": {
        "operationId": "getStatus", "x-entity": "status", "x-action": "get",
        "summary": "Service status",
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "string", "enum": ["green", "red"]}}}}}
      }
    }
  },
  "components": {"schemas": {"Widget": {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string"}, "parts": {"type": "array", "items": {"$ref": "#/components/schemas/Widget"}}
  }},
  "WidgetOut": {"type": "object", "required": ["id", "name"], "additionalProperties": false, "properties": {
    "id": {"type": "string"}, "name": {"type": "string", "minLength": 3}, "owner": {"type": "string", "enum": ["nobody"]},
    "updated_at": {"type": "string", "format": "date-time"}, "parts": {"type": "array", "items": {"$ref": "#/components/schemas/WidgetOut"}}
  }}}}
}
`

// loadCatalog loads a catalog of the widgets connector, described by spec.
func loadCatalog(t testing.TB, spec string) *registry.Catalog {
	t.Helper()
	return registrytest.Load(t, map[string]string{"widgets/connector.json": widgetsManifest, "widgets/openapi.json": spec})
}

// upstream is the vendor API: it answers only requests carrying one of the
// tenants' API keys, and says whose key it saw (never the key itself).
type upstream struct {
	srv  *httptest.Server
	hits atomic.Int64
	// owners maps an API key to the tenant it belongs to.
	mu     sync.Mutex
	owners map[string]string
	// authSeen holds every Authorization header the upstream received.
	authSeen []string
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{owners: map[string]string{}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) setKey(key, owner string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.owners[key] = owner
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	u.mu.Lock()
	owner, ok := u.owners[r.Header.Get("X-Api-Key")]
	if a := r.Header.Get("Authorization"); a != "" {
		u.authSeen = append(u.authSeen, a)
	}
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message": "bad key"}`)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/widgets":
		fmt.Fprintf(w, `[{"id": "w1", "owner": %q, "limit": %q}]`, owner, r.URL.Query().Get("limit"))
	case r.Method == http.MethodPost && r.URL.Path == "/widgets":
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"created": %s, "owner": %q}`, body, owner)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/widgets/"):
		id := strings.TrimPrefix(r.URL.Path, "/widgets/")
		switch id {
		case "denied":
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"message": "token revoked"}`)
		case "secret":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message": "no access"}`)
		case "missing":
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message": "no such widget"}`)
		case "slow-down":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"message": "rate limited"}`)
		case "boom":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"message": "stack trace here"}`)
		default:
			fmt.Fprintf(w, `{"id": %q, "owner": %q}`, id, owner)
		}
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/status":
		io.WriteString(w, `"ok"`)
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message": "no route"}`)
	}
}

// stack is the whole agent path in process: store, secrets, tenants,
// catalog, guarded egress, gateway, MCP endpoint and App mode.
type stack struct {
	db   *database.DB
	svc  *tenants.Service
	gw   *gateway.Gateway
	srv  *httptest.Server
	up   *upstream
	logs *logtest.Buffer
	// bodies collects every response body a test client read.
	bodies *logtest.Buffer
}

func newStack(t testing.TB, db *database.DB) *stack {
	t.Helper()
	return newStackWith(t, db, widgetsSpec, nil)
}

// newStackWith is newStack with the widgets connector described by spec
// and the server configuration changed by configure (nil changes
// nothing).
func newStackWith(t testing.TB, db *database.DB, spec string, configure func(*server.Config)) *stack {
	t.Helper()
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The fixture answers one widget with 429 Retry-After: 7 and these
	// tests check how each upstream answer maps to MCP, call after call
	// on one credential: as serve --upstream-waits ignore, so that the
	// 429 does not turn the next calls into rate_limited (learning waits
	// is tested in gateway, TestUpstreamRateLimitHeadersAreLearnt).
	cfg := server.Config{DB: db, ConnectorCatalog: loadCatalog(t, spec), Logger: logger,
		Admission: admission.Options{IgnoreUpstreamWaits: true}}
	if configure != nil {
		configure(&cfg)
	}
	// Requests carry a fixed request id, which the server's request
	// logging keeps, so that tests can look for it in log lines.
	srv := servertest.StartWith(t, cfg, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(switchboard.RequestIDHeader) == "" {
				r.Header.Set(switchboard.RequestIDHeader, "req_fixture")
			}
			h.ServeHTTP(w, r)
		})
	})
	return &stack{db: db, svc: srv.Tenants(), gw: srv.Gateway(), srv: srv.HTTP, up: newUpstream(t), logs: logs, bodies: &logtest.Buffer{}}
}

// tenant creates a tenant with an instance "shop" of the widgets connector
// whose API key is apiKey, allowing agents, and returns an agent-platform
// caller token.
func (s *stack) tenant(t testing.TB, slug, apiKey string, agents ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := s.svc.CreateTenant(ctx, slug, slug); err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
	s.install(t, slug, "shop", apiKey, agents...)
	return s.caller(t, slug, tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
}

func (s *stack) install(t testing.TB, tenant, instance, apiKey string, agents ...string) {
	t.Helper()
	url, key := secrets.New(s.up.srv.URL), secrets.New(apiKey)
	_, _, err := s.svc.Install(context.Background(), tenant, instance, tenants.InstallRequest{
		ConnectorID: "widgets", AuthMode: "apiKey",
		Fields: map[string]*secrets.Secret{"API_URL": &url, "API_KEY": &key},
		Agents: agents,
	})
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	s.up.setKey(apiKey, tenant)
}

func (s *stack) caller(t testing.TB, tenant string, req tenants.CallerRequest) string {
	t.Helper()
	_, tok, err := s.svc.CreateCaller(context.Background(), tenant, req)
	if err != nil {
		t.Fatalf("CreateCaller: %v", err)
	}
	return tok.Reveal()
}

func (s *stack) mcpURL(tenant, instance string) string {
	return s.srv.URL + "/workspaces/" + tenant + "/webhooks/" + instance + ".mcp"
}

// headers adds the caller's headers to every request and keeps a copy of
// every response body.
type headers struct {
	token, agent string
	bodies       *logtest.Buffer
}

func (h *headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	if h.agent != "" {
		r.Header.Set("X-Agent-Id", h.agent)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	h.bodies.Write(body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// rawResponse is an HTTP answer read in full.
type rawResponse struct {
	status int
	header http.Header
	body   string
}

// post sends body to url as a caller would, with the MCP headers.
func (s *stack) post(t testing.TB, url, token, agent string, body []byte) rawResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if agent != "" {
		req.Header.Set("X-Agent-Id", agent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	s.bodies.Write(b)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}
}
