package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
)

// Viewer is the signed-in person a console page is rendered for.
type Viewer struct {
	// Session is the member's session (tenant, user and role), or the
	// platform operator's (Operator set, no tenant).
	Session members.Session
	// Email is shown in the header; it may be empty.
	Email string
	// CSRF is the session's anti-forgery token, rendered into every form
	// that changes something.
	CSRF string
}

// Access is the console's one access check: it returns the viewer of the
// request, ok false when nobody is signed in (the page then shows Sign
// in), or a typed error for a credential that is present but not valid
// (Sign in with the error, for an ended session) or a request the check
// refuses (the error page, such as a form without its CSRF token). It
// may set headers on the response (a rotated session cookie). Every page
// but Sign in and the stylesheet goes through it, so that swapping the
// check changes who sees every page at once.
type Access func(ec echo.Context) (v Viewer, ok bool, err error)

// SignInAccess is the access check of the sign-in handler: its
// Authenticate middleware resolves the session cookie (rotating it when
// the member's role changed, checking the CSRF token of a state-changing
// request), and the viewer is the session's member.
func SignInAccess(h *signin.Handler, store *members.Store) Access {
	return func(ec echo.Context) (Viewer, bool, error) {
		var (
			sess members.Session
			ok   bool
		)
		err := h.Authenticate(func(c echo.Context) error {
			sess, ok = signin.SessionOf(c.Request().Context())
			return nil
		})(ec)
		if err != nil || !ok {
			return Viewer{}, false, err
		}
		v := Viewer{Session: sess, CSRF: members.CSRFToken(sessionToken(ec, h.SessionCookie()))}
		if sess.Operator {
			v.Email = "Platform operator"
		} else if m, err := store.Member(ec.Request().Context(), sess.Tenant, sess.UserID); err == nil {
			v.Email = m.Email
		}
		return v, true, nil
	}
}

// sessionToken returns the session cookie's value: the one just set on
// the response when the session was rotated, else the request's.
func sessionToken(ec echo.Context, name string) string {
	for _, c := range (&http.Response{Header: ec.Response().Header()}).Cookies() {
		if c.Name == name {
			return c.Value
		}
	}
	if c, err := ec.Request().Cookie(name); err == nil {
		return c.Value
	}
	return ""
}
