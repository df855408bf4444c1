package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
)

// The tenant picker: a person signed in to one tenant with their
// identity provider switches to another tenant where the same identity
// provider account is a member, without signing in again. The rule is
// members.SwitchSession's (see members.Identity and docs/console.md,
// "Tenant picker"); this page only shows it and posts the switch.

var errNoPicker = switchboard.E(switchboard.ErrUnavailable, "members_unavailable",
	"switching tenants is not enabled on this server")

// tenantsData is the tenant picker page.
type tenantsData struct {
	// Current is the tenant the session is in.
	Current string
	Role    members.Role
	members.Picker
	CSRF string
}

func (tenantsData) title() string { return "Tenants" }

// tenantPicker lists the tenants the viewer may switch to, and those
// where a sign-in of their own is needed.
func (c *Console) tenantPicker(ec echo.Context, v *Viewer) error {
	if c.cfg.Members == nil || c.cfg.SignIn == nil {
		return errNoPicker
	}
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return err
	}
	p, err := c.cfg.Members.Picker(ec.Request().Context(), v.Session)
	if err != nil {
		return err
	}
	c.render(ec, http.StatusOK, "tenants", v, tenantsData{Current: t.Name, Role: v.Session.Role, Picker: p, CSRF: v.CSRF})
	return nil
}

// switchTenant moves the viewer's session to the tenant of the form's
// "tenant" field (its id), under the picker's rule: a new session (new
// id and cookie) in that tenant, the old one ended. A refusal is the
// error page and changes nothing.
func (c *Console) switchTenant(ec echo.Context, v *Viewer) error {
	if c.cfg.Members == nil || c.cfg.SignIn == nil {
		return errNoPicker
	}
	if err := checkForm(ec, v); err != nil {
		return err
	}
	tenant := ec.Request().PostForm.Get("tenant")
	if err := checkText("tenant", tenant); err != nil || tenant == "" {
		return switchboard.E(switchboard.ErrInvalid, "invalid_query", "choose a tenant to switch to")
	}
	token := sessionToken(ec, c.cfg.SignIn.SessionCookie())
	if _, err := c.cfg.SignIn.SwitchTenant(ec.Response(), ec.Request(), token, switchboard.TenantID(tenant)); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"instances")
}

// headerTenants returns the tenants the header's tenant menu offers the
// viewer: those the picker lets them switch to. A failure only leaves
// the menu out (it is logged); the page itself still renders.
func (c *Console) headerTenants(ec echo.Context, v *Viewer) []members.Membership {
	if v == nil || c.cfg.Members == nil || c.cfg.SignIn == nil || !v.Session.Identity.Proven() {
		return nil
	}
	p, err := c.cfg.Members.Picker(ec.Request().Context(), v.Session)
	if err != nil {
		c.logger.Warn("the header's tenant menu", "err", err)
		return nil
	}
	return p.Switch
}
