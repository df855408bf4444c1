package server

import (
	"net/http"
	"net/url"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
)

// sessionCheck is connectflow.Sessions over the sign-in pages' session
// cookie and the members store: the member signed in on a browser's
// request (the connect-link page, a GET: no CSRF token applies).
type sessionCheck struct {
	store  *members.Store
	signin *signin.Handler
}

// SignedIn returns the member signed in with r's session cookie and
// their tenant.
func (s sessionCheck) SignedIn(r *http.Request) (switchboard.TenantID, string, bool, error) {
	c, err := r.Cookie(s.signin.SessionCookie())
	if err != nil || c.Value == "" {
		return "", "", false, nil
	}
	sess, err := s.store.ResolveSession(r.Context(), c.Value)
	if err != nil {
		return "", "", false, err
	}
	return sess.Tenant, sess.UserID, true, nil
}

// SignInURL is the sign-in page, told the tenant and where to come back
// to.
func (s sessionCheck) SignInURL(tenantSlug, next string) string {
	return signin.Prefix + "?" + url.Values{"tenant": {tenantSlug}, "next": {next}}.Encode()
}
