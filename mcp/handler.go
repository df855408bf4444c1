// Package mcp serves app instances as MCP servers over Streamable HTTP:
// POST /workspaces/{tenant}/webhooks/{instance}.mcp, JSON-RPC 2.0, built on
// the official Go SDK (github.com/modelcontextprotocol/go-sdk) in stateless
// mode with JSON responses, so that any replica can answer any request.
//
// Before the SDK sees a request, the handler caps the body at 1 MiB,
// authenticates the caller and runs validateAgent (gateway.Authorize), and
// checks that the body is JSON-RPC. Refusals are HTTP errors with a
// JSON-RPC error body. The principal and the resolved instance reach tool
// handlers through the SDK's auth.TokenInfo. Each connector's tools — one
// per registry entity, with an "action" enum — are built once into an
// *mcp.Server shared by every instance of that connector version.
//
// See docs/mcp-sdk-decision.md.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

// Options configures the MCP endpoint.
type Options struct {
	// Logger receives one line per refused request or failed tool call.
	Logger *slog.Logger
	// Version is the server version reported by initialize.
	Version string
	// DisableLocalhostProtection turns off the SDK's DNS-rebinding guard,
	// which refuses requests that reach a loopback listener with a
	// non-loopback Host header. Set it when a reverse proxy on the same
	// host forwards to a loopback address. Every request carries a bearer
	// credential, which a rebinding web page cannot supply.
	DisableLocalhostProtection bool
}

// Path shapes of the endpoint.
const (
	prefix    = "/workspaces/"
	webhooks  = "/webhooks/"
	mcpSuffix = ".mcp"
)

// JSON-RPC error codes used before the SDK sees a request.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	// CodeRefused is the JSON-RPC error code of a request refused by
	// authentication, the agent allowlist or an unknown instance; the
	// error's data.code says which.
	CodeRefused = -32001
)

// Keys of the TokenInfo.Extra map tool handlers read.
const (
	extraPrincipal = "switchboard.principal"
	extraTarget    = "switchboard.target"
	extraLogger    = "switchboard.logger"
)

type handler struct {
	g      *gateway.Gateway
	logger *slog.Logger
	opts   Options
	sdk    http.Handler

	mu      sync.Mutex
	servers map[string]*sdk.Server // by connector id@version
}

// NewHandler returns the MCP endpoint. Mount it at "/workspaces/"; it
// serves paths of the form /workspaces/{tenant}/webhooks/{instance}.mcp.
func NewHandler(g *gateway.Gateway, opts Options) http.Handler {
	logger := opts.Logger
	if logger == nil {
		logger = g.Logger()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	h := &handler{g: g, logger: logger, opts: opts, servers: map[string]*sdk.Server{}}
	streamable := sdk.NewStreamableHTTPHandler(h.getServer, &sdk.StreamableHTTPOptions{
		Stateless:                  true,
		JSONResponse:               true,
		MaxRequestBodyBytes:        gateway.MaxBodyBytes,
		DisableLocalhostProtection: opts.DisableLocalhostProtection,
	})
	h.sdk = sdkauth.RequireBearerToken(verifyFromContext, &sdkauth.RequireBearerTokenOptions{
		AllowMissingExpiration: true,
	})(streamable)
	return h
}

type authorizedKey struct{}

// authorized is what the middleware found; the verifier hands it to the
// SDK as TokenInfo.
type authorized struct {
	principal *auth.Principal
	target    *gateway.Target
	log       *slog.Logger
}

// verifyFromContext is the SDK's token verifier. The token itself was
// checked by our middleware, which put the result in the context; the
// verifier only carries it into TokenInfo.Extra.
func verifyFromContext(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	a, ok := ctx.Value(authorizedKey{}).(*authorized)
	if !ok {
		return nil, sdkauth.ErrInvalidToken
	}
	return &sdkauth.TokenInfo{
		UserID: string(a.principal.Caller.ID),
		Extra:  map[string]any{extraPrincipal: a.principal, extraTarget: a.target, extraLogger: a.log},
	}, nil
}

// parsePath returns the tenant and instance slugs of
// /workspaces/{tenant}/webhooks/{instance}.mcp.
func parsePath(p string) (tenant, instance string, ok bool) {
	rest, ok := strings.CutPrefix(p, prefix)
	if !ok {
		return "", "", false
	}
	tenant, rest, ok = strings.Cut(rest, "/")
	if !ok || tenant == "" {
		return "", "", false
	}
	rest, ok = strings.CutPrefix("/"+rest, webhooks)
	if !ok {
		return "", "", false
	}
	instance, ok = strings.CutSuffix(rest, mcpSuffix)
	if !ok || instance == "" || strings.Contains(instance, "/") {
		return "", "", false
	}
	return tenant, instance, true
}

// rpcError is a JSON-RPC error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcDetail       `json:"error"`
}

type rpcDetail struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

var nullID = json.RawMessage("null")

// requestID returns the id of body when it is a single JSON-RPC request
// with a string or number id, else null: clients (the official SDK among
// them) match an error response to its request by id.
func requestID(body []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &m) != nil || len(m.ID) == 0 || len(m.ID) > 200 {
		return nullID
	}
	if m.ID[0] == '"' || m.ID[0] == '-' || (m.ID[0] >= '0' && m.ID[0] <= '9') {
		return m.ID
	}
	return nullID
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, status, rpcCode int, code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(rpcError{JSONRPC: "2.0", ID: id, Error: rpcDetail{Code: rpcCode, Message: code + ": " + msg, Data: map[string]any{"code": code}}})
	w.Write(append(b, '\n'))
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenantSlug, instanceSlug, ok := parsePath(r.URL.Path)
	if !ok {
		writeRPCError(w, nullID, http.StatusNotFound, CodeRefused, "not_found", "no such endpoint: use /workspaces/{tenant}/webhooks/{instance}.mcp")
		return
	}
	if r.Method != http.MethodPost {
		// Stateless: no standalone SSE stream (GET) and no session to
		// delete (DELETE).
		w.Header().Set("Allow", http.MethodPost)
		writeRPCError(w, nullID, http.StatusMethodNotAllowed, codeInvalidRequest, "method_not_allowed", "the MCP endpoint accepts POST only")
		return
	}
	log := gateway.RequestLogger(h.logger, w).With("tenant", tenantSlug, "instance", instanceSlug, "mode", "mcp")

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, gateway.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			log.Info("mcp request refused", "code", "request_too_large")
			writeRPCError(w, nullID, http.StatusRequestEntityTooLarge, codeInvalidRequest, "request_too_large", "the request body is larger than 1 MiB")
			return
		}
		writeRPCError(w, nullID, http.StatusBadRequest, codeInvalidRequest, "invalid_request", "the request body could not be read")
		return
	}

	ctx := r.Context()
	p, t, err := h.g.Authorize(ctx, r, tenantSlug, instanceSlug)
	if err != nil {
		gateway.LogError(log, "mcp request refused", err)
		d := gateway.Detail(err)
		writeRPCError(w, requestID(body), gateway.Status(err), CodeRefused, d.Code, d.Message)
		return
	}

	if code, msg := checkJSONRPC(body); code != 0 {
		log.Info("mcp request refused", "code", rpcCodeName(code), "agent", p.AgentID)
		writeRPCError(w, nullID, http.StatusBadRequest, code, rpcCodeName(code), msg)
		return
	}

	r = r.WithContext(context.WithValue(ctx, authorizedKey{}, &authorized{principal: p, target: t, log: log}))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	h.sdk.ServeHTTP(w, r)
}

func rpcCodeName(code int) string {
	if code == codeParseError {
		return "parse_error"
	}
	return "invalid_request"
}

// checkJSONRPC checks that body is a JSON-RPC 2.0 message (or a batch of
// them): an object with "jsonrpc": "2.0" and a string "method", or a
// response with a "result" or an "error".
func checkJSONRPC(body []byte) (int, string) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return codeInvalidRequest, "the request body is empty; send a JSON-RPC 2.0 message"
	}
	if !json.Valid(trimmed) {
		return codeParseError, "the request body is not valid JSON"
	}
	var msgs []json.RawMessage
	if trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &msgs); err != nil || len(msgs) == 0 {
			return codeInvalidRequest, "a JSON-RPC batch must be a non-empty array of messages"
		}
	} else {
		msgs = []json.RawMessage{trimmed}
	}
	for _, raw := range msgs {
		var m struct {
			JSONRPC *string         `json:"jsonrpc"`
			Method  *string         `json:"method"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return codeInvalidRequest, "a JSON-RPC message must be an object"
		}
		if m.JSONRPC == nil || *m.JSONRPC != "2.0" {
			return codeInvalidRequest, `a JSON-RPC message must have "jsonrpc": "2.0"`
		}
		if m.Method == nil && m.Result == nil && m.Error == nil {
			return codeInvalidRequest, `a JSON-RPC request must have a string "method"`
		}
		if m.Method != nil && *m.Method == "" {
			return codeInvalidRequest, `a JSON-RPC request must have a non-empty "method"`
		}
	}
	return 0, ""
}

// getServer returns the shared *mcp.Server of the request's connector.
func (h *handler) getServer(r *http.Request) *sdk.Server {
	a, ok := r.Context().Value(authorizedKey{}).(*authorized)
	if !ok {
		return nil
	}
	conn := a.target.Connector
	key := conn.Manifest.ID + "@" + conn.Manifest.Version
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.servers[key]; ok {
		return s
	}
	s := h.newServer(conn)
	h.servers[key] = s
	return s
}

// newServer builds the MCP server of a connector: one tool per entity.
func (h *handler) newServer(conn *registry.Connector) *sdk.Server {
	m := &conn.Manifest
	s := sdk.NewServer(&sdk.Implementation{Name: "switchboard/" + m.ID, Title: m.Name, Version: h.opts.Version}, &sdk.ServerOptions{
		Instructions: m.Docs.LLMShortDescription,
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	})
	for _, e := range conn.API.Entities {
		if e.InputSchema == nil || e.InputSchema.Type != "object" {
			h.logger.Warn("entity left out of the MCP tools: its input schema is not an object", "connector", m.ID, "entity", e.Name)
			continue
		}
		a := e.Annotations.MCP()
		s.AddTool(&sdk.Tool{
			Name:        e.Name,
			Description: e.Description,
			InputSchema: e.InputSchema,
			Annotations: &sdk.ToolAnnotations{
				ReadOnlyHint:    a.ReadOnlyHint,
				IdempotentHint:  a.IdempotentHint,
				DestructiveHint: a.DestructiveHint,
				OpenWorldHint:   a.OpenWorldHint,
			},
		}, h.toolHandler(e))
	}
	return s
}
