package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/registry"
)

// OAuthPattern is the prefix of the per-instance OAuth flow routes:
// connect, callback, status and disconnect.
const OAuthPattern = "/workspaces/{tenant}/webhooks/{instance}/oauth/"

// OAuthHandler serves the OAuth flow of per-user instances (modes oauth
// and oauthCentral) under /workspaces/{tenant}/webhooks/{instance}/oauth/:
//
//	connect     (GET or POST, caller credential) starts a flow for the
//	            caller's user: JSON {authorize_url, expires_at}, or a 302 to
//	            it with ?redirect=1; sets the cookie binding the flow to the
//	            browser
//	callback    (GET, from the provider) finishes it
//	status      (GET, caller credential) the user's connection
//	disconnect  (POST or DELETE, caller credential) revokes and deletes it
//
// and the platform's central callback at /oauth/callback (CallbackHandler).
func (g *Gateway) OAuthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+OAuthPattern+"connect", g.serveConnect)
	mux.HandleFunc("POST "+OAuthPattern+"connect", g.serveConnect)
	mux.HandleFunc("GET "+OAuthPattern+"callback", g.serveCallback)
	mux.HandleFunc("GET "+OAuthPattern+"status", g.serveStatus)
	mux.HandleFunc("POST "+OAuthPattern+"disconnect", g.serveDisconnect)
	mux.HandleFunc("DELETE "+OAuthPattern+"disconnect", g.serveDisconnect)
	mux.HandleFunc("GET "+auth.CentralCallbackPath, g.serveCallback)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, "not_found", "no such route: the OAuth routes are connect, callback, status and disconnect")
	})
	return mux
}

// CallbackHandler serves the platform's central OAuth callback,
// /oauth/callback.
func (g *Gateway) CallbackHandler() http.Handler { return g.OAuthHandler() }

var errNoOAuth = switchboard.E(switchboard.ErrUnavailable, "oauth_unavailable", "OAuth flows are not enabled on this server")

// flowInput authenticates the caller and resolves the instance and its
// fields for a flow route. A trusted caller may name the user with
// ?target_user_id=.
func (g *Gateway) flowInput(r *http.Request) (auth.ModeInput, *slog.Logger, error) {
	ctx := r.Context()
	tenantSlug, instanceSlug := r.PathValue("tenant"), r.PathValue("instance")
	log := g.logger.With("tenant", tenantSlug, "instance", instanceSlug, "mode", "oauth")
	if g.oauth == nil {
		return auth.ModeInput{}, log, errNoOAuth
	}
	p, err := g.callers.Authenticate(ctx, r, tenantSlug)
	if err != nil {
		return auth.ModeInput{}, log, err
	}
	p = p.WithTarget(r.URL.Query().Get("target_user_id"))
	t, err := g.Resolve(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return auth.ModeInput{}, log, err
	}
	c, err := g.credentials(ctx, t)
	if err != nil {
		return auth.ModeInput{}, log, err
	}
	log = log.With("caller", string(p.Caller.ID))
	return auth.ModeInput{Tenant: t.Instance.TenantID, Instance: t.Instance, Manifest: &t.Connector.Manifest, Fields: c.fields, Principal: p}, log, nil
}

func (g *Gateway) serveConnect(w http.ResponseWriter, r *http.Request) {
	in, log, err := g.flowInput(r)
	log = RequestLogger(log, w)
	if err != nil {
		LogError(log, "oauth connect refused", err)
		WriteError(w, err)
		return
	}
	flow, err := g.oauth.Connect(r.Context(), in)
	if err != nil {
		LogError(log, "oauth connect failed", err)
		WriteError(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: flow.CookieName, Value: flow.Binding, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(g.oauth.PublicURL(), "https://"), Expires: flow.ExpiresAt,
	})
	w.Header().Set("Cache-Control", "no-store")
	log.Info("oauth flow started")
	if r.URL.Query().Get("redirect") == "1" {
		http.Redirect(w, r, flow.AuthorizeURL, http.StatusFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"authorize_url": flow.AuthorizeURL, "expires_at": flow.ExpiresAt})
}

func (g *Gateway) serveStatus(w http.ResponseWriter, r *http.Request) {
	in, log, err := g.flowInput(r)
	log = RequestLogger(log, w)
	if err == nil {
		var st *auth.GrantStatus
		if st, err = g.oauth.Status(r.Context(), in); err == nil {
			writeJSON(w, http.StatusOK, st)
			return
		}
	}
	LogError(log, "oauth status failed", err)
	WriteError(w, err)
}

func (g *Gateway) serveDisconnect(w http.ResponseWriter, r *http.Request) {
	in, log, err := g.flowInput(r)
	log = RequestLogger(log, w)
	if err == nil {
		if err = g.oauth.Disconnect(r.Context(), in); err == nil {
			log.Info("oauth grant disconnected")
			writeJSON(w, http.StatusOK, map[string]any{"connected": false})
			return
		}
	}
	LogError(log, "oauth disconnect failed", err)
	WriteError(w, err)
}

// providerErrors are the authorization-response error codes (RFC 6749
// §4.1.2.1) a callback page may name.
var providerErrors = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true, "unsupported_response_type": true,
	"invalid_scope": true, "server_error": true, "temporarily_unavailable": true,
}

func (g *Gateway) serveCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log := RequestLogger(g.logger, w).With("mode", "oauth")
	fail := func(status int, err error) {
		LogError(log, "oauth callback refused", err)
		d := Detail(err)
		page(w, status, "Not connected", d.Message)
	}
	if g.oauth == nil {
		fail(http.StatusServiceUnavailable, errNoOAuth)
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	var binding string
	if state != "" {
		if c, err := r.Cookie(auth.BindingCookieName(state)); err == nil {
			binding = c.Value
		}
	}
	// The state is spent before anything else, whatever the outcome.
	fs, err := g.oauth.ConsumeState(ctx, state, binding)
	if err != nil {
		fail(http.StatusBadRequest, err)
		return
	}
	if state != "" {
		http.SetCookie(w, &http.Cookie{Name: auth.BindingCookieName(state), Value: "", Path: "/", MaxAge: -1, HttpOnly: true})
	}
	log = log.With("tenant", fs.TenantSlug, "instance", fs.InstanceSlug)
	if pt, pi := r.PathValue("tenant"), r.PathValue("instance"); pt != "" && (pt != fs.TenantSlug || pi != fs.InstanceSlug) {
		fail(http.StatusBadRequest, auth.ErrStateInvalid)
		return
	}
	if e := q.Get("error"); e != "" {
		if !providerErrors[e] {
			e = "an error"
		}
		fail(http.StatusBadRequest, switchboard.E(switchboard.ErrForbidden, "authorization_refused",
			"the provider answered %s; nothing was connected", e))
		return
	}
	t, err := g.Resolve(ctx, fs.TenantSlug, fs.InstanceSlug)
	if err == nil && t.Instance.ID != fs.InstanceID {
		err = auth.ErrStateInvalid
	}
	var c *credentials
	if err == nil {
		c, err = g.credentials(ctx, t)
	}
	if err == nil {
		in := auth.ModeInput{Tenant: t.Instance.TenantID, Instance: t.Instance, Manifest: &t.Connector.Manifest, Fields: c.fields}
		err = g.oauth.Finish(ctx, fs, in, q.Get("code"))
	}
	if err != nil {
		status := Status(err)
		if status == http.StatusInternalServerError {
			log.Error("oauth callback failed", "err", err.Error())
		}
		fail(status, err)
		return
	}
	log.Info("oauth grant connected")
	page(w, http.StatusOK, "Connected", fmt.Sprintf("Your account is connected to %s. You can close this window.", t.Connector.Manifest.Name))
}

// page renders a small HTML page without any script; its content security
// policy allows none.
func page(w http.ResponseWriter, status int, title, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>"+
		"<style>body{font-family:sans-serif;max-width:36em;margin:4em auto}</style></head>"+
		"<body><h1>%s</h1><p>%s</p></body></html>\n", html.EscapeString(title), html.EscapeString(title), html.EscapeString(msg))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := json.Marshal(v)
	w.Write(append(b, '\n'))
}

// TestResult is the answer of an instance test: secret-free.
type TestResult struct {
	OK      bool           `json:"ok"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// Test runs the connector's probe operation (manifest verify.probe) for
// the instance with its resolved credentials, as user when the mode is
// per-user, and reports the outcome. It calls no agent allowlist: it is
// the operator's check.
func (g *Gateway) Test(ctx context.Context, tenantSlug, instanceSlug, user string) (*TestResult, error) {
	t, err := g.Resolve(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return nil, err
	}
	c, err := g.credentials(ctx, t)
	if err != nil {
		return nil, err
	}
	p := &auth.Principal{Tenant: t.Instance.TenantID, TenantSlug: t.Tenant.Slug, UserID: user, Kind: "operator"}
	return g.probe(ctx, t, c, p), nil
}

// probe runs the connector's verify.probe operation for t with the
// credentials c as p, and reports the outcome, secret-free.
func (g *Gateway) probe(ctx context.Context, t *Target, c *credentials, p *auth.Principal) *TestResult {
	m := &t.Connector.Manifest
	if m.Verify == nil || m.Verify.Probe == nil || m.Verify.Probe.Operation == "" {
		return &TestResult{OK: false, Message: "the connector declares no probe operation to test with",
			Details: map[string]any{"code": "no_probe", "mode": t.Instance.AuthMode}}
	}
	probe := m.Verify.Probe
	op, ok := probeOperation(t.API(), probe.Operation)
	if !ok {
		return &TestResult{OK: false, Message: "the connector's probe names an unknown operation",
			Details: map[string]any{"code": "invalid_probe", "mode": t.Instance.AuthMode}}
	}
	if c.baseURL == "" {
		return &TestResult{OK: false, Message: "the app instance has no base URL: set the connector's URL field",
			Details: map[string]any{"code": "invalid_config", "mode": t.Instance.AuthMode}}
	}
	args := map[string]any{}
	for k, v := range probe.Args {
		args[k] = registry.Expand(v, m, c.fields)
	}
	details := map[string]any{"operation": op.Name, "mode": t.Instance.AuthMode}
	start := time.Now()
	applier, err := g.appAuth.Build(ctx, auth.ModeInput{Tenant: t.Instance.TenantID, Instance: t.Instance, Manifest: m, Fields: c.fields, Principal: p})
	if err == nil {
		var resp *registry.Response
		resp, err = g.dispatcher.Do(ctx, registry.Call{Op: op, BaseURL: c.baseURL, Args: args, Credentials: applier})
		if err == nil {
			details["status"] = resp.Status
		}
	}
	details["latency_ms"] = time.Since(start).Milliseconds()
	if err != nil {
		d := Detail(err)
		details["code"] = d.Code
		var ue *registry.UpstreamError
		if errors.As(err, &ue) {
			ue.Message = scrub(ue.Message, m, c.fields)
			d = Detail(err)
			if ue.Status != 0 {
				details["status"] = ue.Status
			}
		}
		return &TestResult{OK: false, Message: d.Message, Details: details}
	}
	st, _ := details["status"].(int)
	want := probe.Expect
	if want == "" {
		want = "2xx"
	}
	if statusMatches(st, want) {
		return &TestResult{OK: true, Message: "the connection works", Details: details}
	}
	return &TestResult{OK: false, Message: fmt.Sprintf("the probe answered %d, expected %s", st, want), Details: details}
}

// probeOperation finds a probe's operation: an operationId, or an
// "entity.action" of the registry.
func probeOperation(api *registry.API, name string) (*registry.Operation, bool) {
	if api == nil {
		return nil, false
	}
	if op, ok := api.Operation(name); ok {
		return op, true
	}
	if ent, act, cut := strings.Cut(name, "."); cut {
		if e, found := api.Entity(ent); found {
			if a, found := e.Action(act); found && a.Op != nil {
				return a.Op, true
			}
		}
	}
	return nil, false
}

// statusMatches reports whether status is of the class want ("2xx") or
// equals it ("204").
func statusMatches(status int, want string) bool {
	if len(want) == 3 && (want[1:] == "xx" || want[1:] == "XX") {
		return strconv.Itoa(status/100) == want[:1]
	}
	return strconv.Itoa(status) == want
}
