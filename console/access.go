package console

import (
	"net/http"

	"github.com/switchboardhq/switchboard/members"
)

// Viewer is the signed-in person a console page is rendered for.
type Viewer struct {
	// Session is the member's session: tenant, user and role.
	Session members.Session
	// Email is shown in the header; it may be empty.
	Email string
	// CSRF is the session's anti-forgery token, rendered into every form
	// that changes something.
	CSRF string
}

// Access is the console's one access check: it returns the viewer of r,
// ok false when nobody is signed in (the page then shows Sign in), or a
// typed error for a credential that is present but not valid (rendered
// as the error page). It may set headers on w (a rotated session
// cookie). Every page but Sign in and the stylesheet goes through it, so
// that swapping the check changes who sees every page at once.
type Access func(w http.ResponseWriter, r *http.Request) (v Viewer, ok bool, err error)

// SessionCookie is the name of the session cookie on plain-http servers
// (the sign-in handler's name for it).
const SessionCookie = "sb_session"

// SessionAccess is the access check of the members' sessions as they
// stand before the sign-in pages: the session cookie's token resolved by
// store. It changes nothing (no rotation, no CSRF check: the console's
// pages only read until sign-in's middleware replaces this check).
func SessionAccess(store *members.Store) Access {
	return func(w http.ResponseWriter, r *http.Request) (Viewer, bool, error) {
		var token string
		for _, name := range []string{"__Host-" + SessionCookie, SessionCookie} {
			if c, err := r.Cookie(name); err == nil && c.Value != "" {
				token = c.Value
				break
			}
		}
		if token == "" {
			return Viewer{}, false, nil
		}
		sess, err := store.ResolveSession(r.Context(), token)
		if err != nil {
			return Viewer{}, false, err
		}
		v := Viewer{Session: sess, CSRF: members.CSRFToken(token)}
		if m, err := store.Member(r.Context(), sess.Tenant, sess.UserID); err == nil {
			v.Email = m.Email
		}
		return v, true, nil
	}
}
