package signin

import (
	"net/http"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
)

// SwitchTenant moves the browser's session, whose token is token (the
// session cookie's value, or the rotated one just set), to tenant without
// a new sign-in, under members.SwitchSession's rule (the same OpenID
// Connect identity only): the old session ends and the cookies of the
// new one are set on w. The caller checks the request's CSRF token
// first. A refusal changes nothing.
func (h *Handler) SwitchTenant(w http.ResponseWriter, r *http.Request, token string, tenant switchboard.TenantID) (members.Session, error) {
	sess, fresh, err := h.cfg.Members.SwitchSession(r.Context(), token, tenant)
	if err != nil {
		return members.Session{}, err
	}
	h.setSession(w, sess, fresh)
	return sess, nil
}
