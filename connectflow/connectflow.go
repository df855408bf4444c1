// Package connectflow serves the browser side of the OAuth flows of
// per-user app instances (modes oauth and oauthCentral): the connect,
// callback, status and disconnect routes of an instance and the platform's
// central callback. The token machinery is auth.OAuth's; this package is
// the HTTP surface in front of it, beside the admin API and MCP.
package connectflow

import (
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
)

// Config wires the flow pages.
type Config struct {
	// Gateway authenticates callers and resolves instances and their
	// fields.
	Gateway *gateway.Gateway
	// OAuth runs the flows; nil serves every route with 503
	// oauth_unavailable.
	OAuth *auth.OAuth
	// Logger receives one line per flow step; nil uses the gateway's.
	Logger *slog.Logger
	// Sessions tells who is signed in, for connect links; nil refuses
	// to open them (signin_unavailable).
	Sessions Sessions
	// ConsoleURL, when an http(s) URL, is where the flow pages send the
	// person next (after connecting, the instance's page there,
	// ConsoleURL + "instances/" + slug); else they say to close the tab.
	ConsoleURL string
}

// Pages serves the flow routes of per-user instances under
// /workspaces/{tenant}/webhooks/{instance}/oauth/ (the server's router
// sets the path values tenant and instance):
//
//	connect     (GET or POST, caller credential) starts a flow for the
//	            caller's user: JSON {authorize_url, expires_at}, or a 302 to
//	            it with ?redirect=1; sets the cookie binding the flow to the
//	            browser
//	callback    (GET, from the provider) finishes it
//	status      (GET, caller credential) the user's connection
//	disconnect  (POST or DELETE, caller credential) revokes and deletes it
//	link        (GET, ?token=, a signed-in member) opens a connect link
//
// and the platform's central callback at /oauth/callback
// (auth.CentralCallbackPath), also ServeCallback.
type Pages struct {
	g        *gateway.Gateway
	oauth    *auth.OAuth
	logger   *slog.Logger
	sessions Sessions
	console  string
}

// New returns the flow pages.
func New(cfg Config) *Pages {
	logger := cfg.Logger
	if logger == nil {
		logger = cfg.Gateway.Logger()
	}
	return &Pages{g: cfg.Gateway, oauth: cfg.OAuth, logger: logger, sessions: cfg.Sessions, console: consoleURL(cfg.ConsoleURL)}
}

// ServeNotFound answers any other request under the flow routes, and a
// request to the central callback with another method than GET.
func (f *Pages) ServeNotFound(w http.ResponseWriter, r *http.Request) {
	switchboard.WriteError(w, switchboard.E(switchboard.ErrNotFound, "route_not_found", "no such route: the OAuth routes are connect, callback, status and disconnect"))
}

var errNoOAuth = switchboard.E(switchboard.ErrUnavailable, "oauth_unavailable", "OAuth flows are not enabled on this server")

// flowInput authenticates the caller and resolves the instance and its
// fields for a flow route. A trusted caller may name the user with
// ?target_user_id=.
func (f *Pages) flowInput(r *http.Request) (auth.ModeInput, *slog.Logger, error) {
	ctx := r.Context()
	tenantSlug, instanceSlug := r.PathValue("tenant"), r.PathValue("instance")
	log := f.logger.With("tenant", tenantSlug, "instance", instanceSlug, "mode", "oauth")
	if f.oauth == nil {
		return auth.ModeInput{}, log, errNoOAuth
	}
	p, err := f.g.Authenticate(ctx, r, tenantSlug)
	if err != nil {
		return auth.ModeInput{}, log, err
	}
	p = p.WithTarget(r.URL.Query().Get("target_user_id"))
	t, err := f.g.Resolve(ctx, tenantSlug, instanceSlug)
	if err != nil {
		return auth.ModeInput{}, log, err
	}
	in, err := f.g.ModeInput(ctx, t, p)
	if err != nil {
		return auth.ModeInput{}, log, err
	}
	log = log.With("caller", string(p.Caller.ID))
	return in, log, nil
}

// ServeConnect serves the connect route.
func (f *Pages) ServeConnect(w http.ResponseWriter, r *http.Request) {
	in, log, err := f.flowInput(r)
	log = gateway.RequestLogger(log, w)
	if err != nil {
		gateway.LogError(log, "oauth connect refused", err)
		switchboard.WriteError(w, err)
		return
	}
	flow, err := f.oauth.Connect(r.Context(), in)
	if err != nil {
		gateway.LogError(log, "oauth connect failed", err)
		switchboard.WriteError(w, err)
		return
	}
	f.setBinding(w, flow)
	log.Info("oauth flow started")
	if r.URL.Query().Get("redirect") == "1" {
		http.Redirect(w, r, flow.AuthorizeURL, http.StatusFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"authorize_url": flow.AuthorizeURL, "expires_at": flow.ExpiresAt})
}

// ServeStatus serves the status route.
func (f *Pages) ServeStatus(w http.ResponseWriter, r *http.Request) {
	in, log, err := f.flowInput(r)
	log = gateway.RequestLogger(log, w)
	if err == nil {
		var st *auth.GrantStatus
		if st, err = f.oauth.Status(r.Context(), in); err == nil {
			writeJSON(w, http.StatusOK, st)
			return
		}
	}
	gateway.LogError(log, "oauth status failed", err)
	switchboard.WriteError(w, err)
}

// ServeDisconnect serves the disconnect route.
func (f *Pages) ServeDisconnect(w http.ResponseWriter, r *http.Request) {
	in, log, err := f.flowInput(r)
	log = gateway.RequestLogger(log, w)
	if err == nil {
		if _, err = f.oauth.Disconnect(r.Context(), in); err == nil {
			log.Info("oauth grant disconnected")
			writeJSON(w, http.StatusOK, map[string]any{"connected": false})
			return
		}
	}
	gateway.LogError(log, "oauth disconnect failed", err)
	switchboard.WriteError(w, err)
}

// providerErrors are the authorization-response error codes (RFC 6749
// §4.1.2.1) a callback page may name.
var providerErrors = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true, "unsupported_response_type": true,
	"invalid_scope": true, "server_error": true, "temporarily_unavailable": true,
}

// ServeCallback serves the callback route.
func (f *Pages) ServeCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log := gateway.RequestLogger(f.logger, w).With("mode", "oauth")
	fail := func(status int, err error) {
		gateway.LogError(log, "oauth callback refused", err)
		d := switchboard.DetailOf(err)
		f.page(w, status, "Not connected", "Nothing was connected: "+d.Message)
	}
	if f.oauth == nil {
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
	fs, err := f.oauth.ConsumeState(ctx, state, binding, auth.Callback{TenantSlug: r.PathValue("tenant"), InstanceSlug: r.PathValue("instance")})
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
	t, err := f.g.Resolve(ctx, fs.TenantSlug, fs.InstanceSlug)
	if err == nil && t.Instance.ID != fs.InstanceID {
		err = auth.ErrStateInvalid
	}
	var in auth.ModeInput
	if err == nil {
		in, err = f.g.ModeInput(ctx, t, nil)
	}
	if err == nil {
		err = f.oauth.Finish(ctx, fs, in, q.Get("code"))
	}
	if err != nil {
		status := switchboard.ProblemOf(err).Status
		if status == http.StatusInternalServerError {
			log.Error("oauth callback failed", "err", err.Error())
		}
		fail(status, err)
		return
	}
	log.Info("oauth grant connected")
	f.pageNext(w, http.StatusOK, f.instancePage(fs.InstanceSlug), "Connected", fmt.Sprintf("Your %s account is connected to the workspace %s. "+
		"Agents acting for you can now use it; you can disconnect it at any time.", t.Connector.Manifest.Name, fs.TenantSlug))
}

// pageTemplate is every flow page: what happened and where to go next,
// without any script (html/template escapes every value).
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:sans-serif;max-width:36em;margin:4em auto}</style></head>
<body><h1>{{.Title}}</h1>
<p>{{.Message}}</p>
{{if .Console}}<p>You can close this tab, or <a href="{{.Console}}">go back to the console</a>.</p>
{{else}}<p>You can close this tab and go back to your agent.</p>
{{end}}</body></html>
`))

// page renders a flow page with status: title, what happened (msg) and
// where to go next (the console when there is one, else close the tab).
// Its content security policy allows no script.
func (f *Pages) page(w http.ResponseWriter, status int, title, msg string) {
	f.pageNext(w, status, f.console, title, msg)
}

// instancePage is the console's page of the instance slug, or "" when
// there is no console.
func (f *Pages) instancePage(slug string) string {
	if f.console == "" {
		return ""
	}
	return strings.TrimSuffix(f.console, "/") + "/instances/" + url.PathEscape(slug)
}

// pageNext is page with next (a console URL, or "") as where to go next.
func (f *Pages) pageNext(w http.ResponseWriter, status int, next, title, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, struct{ Title, Message, Console string }{title, msg, next})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := json.Marshal(v)
	w.Write(append(b, '\n'))
}
