package signin

import (
	"html/template"
	"net/http"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
)

// pages are the sign-in pages: plain HTML forms, no script.
var pages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Switchboard sign-in</title><style>body{font:16px system-ui,sans-serif;max-width:32em;margin:4em auto;padding:0 1em}button,a.button{font:inherit;padding:.4em 1em}a.button{display:inline-block;border:1px solid;border-radius:.3em;text-decoration:none}</style></head><body>{{end}}
{{define "link"}}{{template "head"}}<h1>Sign in to Switchboard</h1>
<p>This link signs you in once. Continue to sign in in this browser.</p>
{{if .Replaces}}<p>This browser is signed in now: signing in with the link ends that session.</p>{{end}}
<form method="post" action="{{.Action}}"><input type="hidden" name="token" value="{{.Token}}">{{if .Next}}<input type="hidden" name="next" value="{{.Next}}">{{end}}<button type="submit">Sign in</button></form>
</body></html>{{end}}
{{define "status"}}{{template "head"}}{{if .Member.UserID}}<h1>Signed in</h1>
<p>You are signed in as <strong>{{.Member.Email}}</strong> ({{.Member.Role}}) until {{.Session.ExpiresAt.Format "2006-01-02 15:04 MST"}} at the latest.</p>
{{if .Next}}<p><a href="{{.Next}}">Continue</a></p>{{end}}
<form method="post" action="{{.SignOut}}"><input type="hidden" name="csrf_token" value="{{.CSRF}}"><button type="submit">Sign out</button></form>
<form method="post" action="{{.SignOutEverywhere}}"><input type="hidden" name="csrf_token" value="{{.CSRF}}"><button type="submit">Sign out everywhere</button></form>
{{else}}<h1>Signed out</h1><p>You are not signed in.</p>
{{range .Issuers}}<p><a class="button" href="{{.URL}}">Sign in with {{.Name}}</a></p>
{{end}}<p>{{if .Issuers}}Otherwise, ask{{else}}Ask{{end}} your tenant's owner or the operator for a one-time sign-in link{{if .Next}}, and open it in this browser: you will then come back here{{end}}.</p>{{end}}
</body></html>{{end}}
{{define "error"}}{{template "head"}}<h1>Sign-in failed</h1><p>{{.Message}}</p><p>Code: <code>{{.Code}}</code></p></body></html>{{end}}
`))

// render writes the page name with data.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, data); err != nil {
		h.log.Warn("rendering a sign-in page", "page", name, "err", err)
	}
}

// fail renders err as an HTML page with its status; an internal error is
// logged, its text never shown.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	p := switchboard.ProblemOf(err)
	switch e, typed := switchboard.AsError(err); {
	case p.Internal:
		h.log.Error("sign-in", "path", r.URL.Path, "err", err)
	case typed && e.Err != nil:
		// The cause (an issuer's refusal, a bad ID token) is for the
		// operator; the person sees the typed message.
		h.log.Warn("sign-in refused", "path", r.URL.Path, "code", p.Detail.Code, "err", e.Err)
	}
	h.render(w, p.Status, "error", p.Detail)
}

// linkForm shows the confirmation form of a sign-in link. It reads
// nothing and spends nothing.
func (h *Handler) linkForm(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	if token == "" || len(token) > 512 {
		h.fail(w, r, switchboard.E(switchboard.ErrUnauthorized, "invalid_link", "the sign-in link is incomplete; open it as it was sent"))
		return
	}
	h.render(w, http.StatusOK, "link", struct {
		Action, Token, Next string
		// Replaces: the browser brought a session, which signing in ends.
		Replaces bool
	}{LinkPath, token, SafeNext(r.URL.Query().Get(NextParam)), h.sessionToken(r) != ""})
}

// redeemLink spends a sign-in link or invitation and signs its member in
// with a new session; a session the browser brought is ended first.
func (h *Handler) redeemLink(w http.ResponseWriter, r *http.Request) {
	if err := h.sameOrigin(r); err != nil {
		h.fail(w, r, err)
		return
	}
	if token := r.PostFormValue("token"); members.IsOperatorLink(token) {
		h.redeemOperatorLink(w, r, token)
		return
	}
	m, err := h.cfg.Members.Redeem(r.Context(), r.PostFormValue("token"))
	h.signIn(w, r, m, members.Identity{}, err, r.PostFormValue(NextParam))
}

// signIn ends a sign-in: unless err (the failure to find the member) is
// set, it starts m's session and sends the browser to next when it is a
// safe local path (SafeNext), else to the path the sign-in page
// remembered, else to the status page.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request, m members.Member, id members.Identity, err error, next string) {
	if err == nil {
		err = h.startSession(w, r, m, id)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, h.takeNext(w, r, next), http.StatusSeeOther)
}

// startSession signs m in: it revokes the session the browser brought,
// if any (a session id is never carried across a sign-in), and sets the
// cookies of a new one, signed in with id (zero: a one-time link).
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, m members.Member, id members.Identity) error {
	if err := h.endBrowserSession(r); err != nil {
		return err
	}
	var (
		sess  members.Session
		token secrets.Secret
		err   error
	)
	if id.Proven() {
		sess, token, err = h.cfg.Members.CreateSessionAs(r.Context(), m.Tenant, m.UserID, id)
	} else {
		sess, token, err = h.cfg.Members.CreateSession(r.Context(), m.Tenant, m.UserID)
	}
	if err != nil {
		return err
	}
	h.setSession(w, sess, token)
	return nil
}

// redeemOperatorLink spends an operator sign-in link and signs the
// operator in with a new operator session; a session the browser brought
// (the operator's or a member's) is ended first. Without a next page of
// its own the browser goes to the operator's home.
func (h *Handler) redeemOperatorLink(w http.ResponseWriter, r *http.Request, token string) {
	sess, sessToken, err := h.cfg.Members.RedeemOperatorLink(r.Context(), token)
	if err == nil {
		err = h.endBrowserSession(r)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.setSession(w, sess, sessToken)
	next := r.PostFormValue(NextParam)
	if SafeNext(next) == "" && h.cfg.OperatorHome != "" {
		next = h.cfg.OperatorHome
	}
	http.Redirect(w, r, h.takeNext(w, r, next), http.StatusSeeOther)
}

// endBrowserSession revokes the session the browser brought, if any: a
// session id is never carried across a sign-in.
func (h *Handler) endBrowserSession(r *http.Request) error {
	if old := h.sessionToken(r); old != "" {
		return h.cfg.Members.SignOut(r.Context(), old)
	}
	return nil
}

// sessionInfo is the JSON of GET /signin/session.
type sessionInfo struct {
	members.Session
	Email string `json:"email"`
	// CSRFToken goes in the X-CSRF-Token header of state-changing
	// requests made with the session cookie.
	CSRFToken string `json:"csrf_token"`
}

// current returns the request's session, its member and its (possibly
// rotated) CSRF token.
func (h *Handler) current(w http.ResponseWriter, r *http.Request) (members.Session, members.Member, string, error) {
	sess, ok, err := h.resolve(w, r)
	if err == nil && !ok {
		err = switchboard.E(switchboard.ErrUnauthorized, "invalid_session", "not signed in")
	}
	if err != nil {
		return members.Session{}, members.Member{}, "", err
	}
	m := members.Member{UserID: sess.UserID, Email: "the platform operator", Role: "operator"}
	if !sess.Operator {
		if m, err = h.cfg.Members.Member(r.Context(), sess.Tenant, sess.UserID); err != nil {
			return members.Session{}, members.Member{}, "", err
		}
	}
	token := h.sessionToken(r)
	// A rotated session's token is in the cookie just set.
	for _, c := range (&http.Response{Header: w.Header()}).Cookies() {
		if c.Name == h.SessionCookie() {
			token = c.Value
		}
	}
	return sess, m, members.CSRFToken(token), nil
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request) {
	sess, m, csrf, err := h.current(w, r)
	if err != nil {
		switchboard.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	writeJSON(w, sessionInfo{Session: sess, Email: m.Email, CSRFToken: csrf})
}

// status shows who is signed in. Signed out, it remembers ?next= (a
// safe local path) for the sign-in that follows in this browser and
// offers one "Sign in with <issuer>" button per OpenID Connect issuer,
// carrying ?tenant= (when given) and next; signed in, it links to next.
func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	sess, m, csrf, err := h.current(w, r)
	if err != nil && switchboard.CodeOf(err) != "invalid_session" {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	next := SafeNext(q.Get(NextParam))
	type button struct{ Name, URL string }
	var issuers []button
	if m.UserID == "" {
		h.rememberNext(w, next)
		for _, l := range h.Issuers() {
			issuers = append(issuers, button{l.Name, l.StartURLFor(q.Get("tenant"), next)})
		}
	}
	h.render(w, http.StatusOK, "status", struct {
		Session                                members.Session
		Member                                 members.Member
		CSRF, SignOut, SignOutEverywhere, Next string
		Issuers                                []button
	}{sess, m, csrf, SignOutPath, SignOutEverywherePath, next, issuers})
}

// signOut ends this browser's session.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	if _, ok, err := h.resolve(w, r); err != nil || !ok {
		h.signOutFailed(w, r, err)
		return
	}
	if err := h.cfg.Members.SignOut(r.Context(), h.sessionToken(r)); err != nil {
		h.fail(w, r, err)
		return
	}
	h.clearSession(w)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// signOutEverywhere ends every session of the signed-in member.
func (h *Handler) signOutEverywhere(w http.ResponseWriter, r *http.Request) {
	sess, ok, err := h.resolve(w, r)
	if err != nil || !ok {
		h.signOutFailed(w, r, err)
		return
	}
	if sess.Operator {
		_, err = h.cfg.Members.RevokeOperatorSessions(r.Context(), members.ActorOperator)
	} else {
		_, err = h.cfg.Members.RevokeSessions(r.Context(), sess.UserID, sess.Tenant, sess.UserID)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.clearSession(w)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// signOutFailed answers a sign-out without a valid session: without a
// session there is nothing to end (the cookies are cleared); a bad CSRF
// token is refused.
func (h *Handler) signOutFailed(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil && switchboard.CodeOf(err) != "invalid_session" {
		h.fail(w, r, err)
		return
	}
	h.clearSession(w)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}
