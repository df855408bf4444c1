// Package signin is how people sign in to Switchboard and how their
// browser requests are authenticated: one-time sign-in links (the
// embedded default, no identity provider needed), OpenID Connect, the
// session cookie, sign-out and sign-out everywhere, and CSRF protection.
//
// A session is a server-side row (package members); the browser holds
// only its opaque token, in an HttpOnly, SameSite=Lax cookie (Secure, and
// named with the __Host- prefix, when the public URL is https). A new
// token is issued at every sign-in (the session a browser brought is
// revoked first, against session fixation) and whenever the member's
// role changed. Every state-changing request made with the cookie must
// carry the session's CSRF token (members.CSRFToken): in the X-CSRF-Token
// header, or the csrf_token field of a form. Pages are plain HTML forms,
// without script.
//
// The platform operator signs in the same way, with an operator sign-in
// link (members.CreateOperatorLink: `switchboard admin login-link
// --operator` or POST /v1/operator-sign-in-links): its confirmation starts
// an operator session, which has no tenant (Session.Operator), and which
// Authenticate resolves by its token's prefix.
package signin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
)

// Paths of the sign-in pages, under the server's public URL.
const (
	// Prefix is where every sign-in route lives; mount Handler there.
	Prefix = "/signin/"
	// LinkPath opens a sign-in link or an invitation: GET shows a
	// confirmation form (so that link scanners and previews, which only
	// GET, cannot spend a single-use link), POST signs in.
	LinkPath = "/signin/link"
	// SessionPath answers GET with the session as JSON (who, which
	// tenant, which role, the CSRF token), 401 without one.
	SessionPath = "/signin/session"
	// SignOutPath ends this browser's session (POST).
	SignOutPath = "/signin/sign-out"
	// SignOutEverywherePath ends every session of the member (POST).
	SignOutEverywherePath = "/signin/sign-out-everywhere"
)

// CSRFHeader is the request header that carries the CSRF token; forms
// send it as the field CSRFField.
const (
	CSRFHeader = "X-CSRF-Token"
	CSRFField  = "csrf_token"
)

// LinkURL is the URL of the sign-in link of token under publicURL.
func LinkURL(publicURL, token string) string {
	return strings.TrimRight(publicURL, "/") + LinkPath + "?token=" + url.QueryEscape(token)
}

// Config is what a Handler is built from.
type Config struct {
	// Members keeps members, links and sessions.
	Members *members.Store
	// PublicURL is the server's public base URL: its scheme decides the
	// cookies' Secure attribute and its origin is the only one allowed
	// to post the sign-in form.
	PublicURL string
	// Logger receives the handler's log lines; nil discards them.
	Logger *slog.Logger
	// OIDC, when it names issuers, turns on OpenID Connect sign-in.
	OIDC OIDCConfig
	// OperatorHome is where an operator sign-in link leads when it names
	// no next page (the console's operator pages); empty: the status page.
	OperatorHome string
}

// Handler serves the sign-in pages and authenticates session cookies.
type Handler struct {
	cfg    Config
	secure bool
	origin string
	mux    *http.ServeMux
	log    *slog.Logger
	// issuers are the OpenID Connect issuers, the default first.
	issuers []*oidcIssuer
}

// New builds the sign-in handler.
func New(cfg Config) *Handler {
	h := &Handler{cfg: cfg, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Host != "" {
		h.secure = u.Scheme == "https"
		h.origin = u.Scheme + "://" + u.Host
	}
	m := http.NewServeMux()
	m.HandleFunc("GET "+LinkPath, h.linkForm)
	m.HandleFunc("POST "+LinkPath, h.redeemLink)
	m.HandleFunc("GET "+SessionPath, h.session)
	m.HandleFunc("GET "+Prefix+"{$}", h.status)
	m.HandleFunc("POST "+SignOutPath, h.signOut)
	m.HandleFunc("POST "+SignOutEverywherePath, h.signOutEverywhere)
	m.HandleFunc("GET "+OIDCStartPath, h.oidcStart)
	m.HandleFunc("GET "+OIDCCallbackPath, h.oidcCallback)
	m.HandleFunc("GET "+OIDCCallbackPath+"/{issuer}", h.oidcCallback)
	for _, i := range cfg.OIDC.Issuers {
		h.issuers = append(h.issuers, &oidcIssuer{cfg: i})
	}
	h.mux = m
	return h
}

// ServeHTTP serves the routes under Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.mux.ServeHTTP(w, r)
}

// SessionCookie is the name of the session cookie: with the __Host-
// prefix (which browsers only accept from https, for the whole host and
// path /) when the public URL is https.
func (h *Handler) SessionCookie() string {
	if h.secure {
		return "__Host-sb_session"
	}
	return "sb_session"
}

// CSRFCookie is the name of the cookie that holds the CSRF token, readable
// by the console's pages (not HttpOnly) for the X-CSRF-Token header.
func (h *Handler) CSRFCookie() string {
	if h.secure {
		return "__Host-sb_csrf"
	}
	return "sb_csrf"
}

// setSession sets the cookies of a new session.
func (h *Handler) setSession(w http.ResponseWriter, sess members.Session, token secrets.Secret) {
	maxAge := int(time.Until(sess.ExpiresAt) / time.Second)
	if maxAge < 1 {
		maxAge = 1
	}
	http.SetCookie(w, &http.Cookie{Name: h.SessionCookie(), Value: token.Reveal(), Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
	http.SetCookie(w, &http.Cookie{Name: h.CSRFCookie(), Value: members.CSRFToken(token.Reveal()), Path: "/", MaxAge: maxAge,
		Secure: h.secure, SameSite: http.SameSiteLaxMode})
}

// clearSession expires both cookies.
func (h *Handler) clearSession(w http.ResponseWriter) {
	for _, name := range []string{h.SessionCookie(), h.CSRFCookie()} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: name == h.SessionCookie(), Secure: h.secure, SameSite: http.SameSiteLaxMode})
	}
}

// sessionToken returns the session cookie's value, or "".
func (h *Handler) sessionToken(r *http.Request) string {
	c, err := r.Cookie(h.SessionCookie())
	if err != nil {
		return ""
	}
	return c.Value
}

var errCSRF = switchboard.E(switchboard.ErrForbidden, "csrf_failed",
	"this request was made with a session cookie but without the session's CSRF token (header X-CSRF-Token or form field csrf_token)")

// safeMethod reports a method that changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkCSRF refuses a state-changing request whose CSRF token is not the
// session's. Reading the form field parses a form body (bounded by
// net/http to 10 MB); JSON bodies use the header.
func checkCSRF(r *http.Request, sessionToken string) error {
	if safeMethod(r.Method) {
		return nil
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue(CSRFField)
	}
	want := members.CSRFToken(sessionToken)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errCSRF
	}
	return nil
}

// sameOrigin refuses a cross-site form post (login CSRF: signing a victim
// in as someone else): the Origin header, when the browser sends one,
// must be the public URL's, and Sec-Fetch-Site must not be cross-site.
// Origin "null" is what a browser sends for a form on a page served with
// Referrer-Policy: no-referrer (as these pages are, so that a link's token
// never leaves in a Referer): it is accepted only when the browser also
// says the form was same-origin, since sandboxed frames and data: URLs
// send "null" too.
func (h *Handler) sameOrigin(r *http.Request) error {
	fetchSite := r.Header.Get("Sec-Fetch-Site")
	switch o := r.Header.Get("Origin"); {
	case o == "null" && fetchSite != "same-origin":
		return errCrossSite
	case o != "" && o != "null" && o != h.origin:
		return errCrossSite
	}
	if fetchSite == "cross-site" || fetchSite == "same-site" {
		return errCrossSite
	}
	return nil
}

var errCrossSite = switchboard.E(switchboard.ErrForbidden, "csrf_failed", "a sign-in form posted from another site is refused")

type sessionKey struct{}

// WithSession returns ctx carrying sess (what Authenticate does).
func WithSession(ctx context.Context, sess members.Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, sess)
}

// SessionOf returns the signed-in member's session of a request that
// Authenticate admitted with a cookie.
func SessionOf(ctx context.Context) (members.Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(members.Session)
	return s, ok
}

// resolve authenticates the session cookie of r: the live session, with
// its CSRF token checked for a state-changing request, rotated (new
// cookies set on w) when the member's role changed. ok is false when r
// has no session cookie.
func (h *Handler) resolve(w http.ResponseWriter, r *http.Request) (sess members.Session, ok bool, err error) {
	token := h.sessionToken(r)
	if token == "" {
		return members.Session{}, false, nil
	}
	ctx := r.Context()
	if members.IsOperatorSession(token) {
		// The operator's session has no member whose role could change:
		// it is never stale.
		sess, err = h.cfg.Members.ResolveOperatorSession(ctx, token)
	} else {
		sess, err = h.cfg.Members.ResolveSession(ctx, token)
	}
	if err != nil {
		if switchboard.CodeOf(err) == "invalid_session" {
			h.clearSession(w)
		}
		return members.Session{}, true, err
	}
	if err := checkCSRF(r, token); err != nil {
		return members.Session{}, true, err
	}
	if sess.Stale {
		fresh, newToken, err := h.cfg.Members.RotateSession(ctx, token)
		if err != nil {
			return members.Session{}, true, err
		}
		h.setSession(w, fresh, newToken)
		sess = fresh
	}
	return sess, true, nil
}

// Authenticate is the echo middleware of the /v1 routes for browsers: a
// request with the session cookie runs with its session (SessionOf) once
// the cookie is valid and, for a state-changing method, the CSRF token
// matches; an invalid session answers 401 invalid_session, a missing or
// wrong CSRF token 403 csrf_failed. A request with an Authorization
// header (an operator token, a tenant API key) or without the cookie
// passes through untouched, for the route's own authentication.
func (h *Handler) Authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Header.Get(echo.HeaderAuthorization) != "" {
			return next(c)
		}
		sess, ok, err := h.resolve(c.Response(), r)
		if err != nil {
			return err
		}
		if ok {
			c.SetRequest(r.WithContext(WithSession(r.Context(), sess)))
		}
		return next(c)
	}
}

// writeJSON writes v as the JSON body.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Write(append(b, '\n'))
}
