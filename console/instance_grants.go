package console

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/tenants"
)

var errNoGrants = switchboard.E(switchboard.ErrUnavailable, "oauth_unavailable", "OAuth flows are not enabled on this server")

// grantView is a grant as the console shows it: its state, scopes and
// times, never a token.
type grantView struct {
	// State is "connected", "not-connected" or "reconnect".
	State     string
	Scopes    []string
	ExpiresAt time.Time
	UpdatedAt time.Time
}

// StateLabel names the state for people.
func (g grantView) StateLabel() string {
	switch g.State {
	case "connected":
		return "Connected"
	case "reconnect":
		return "Needs reconnecting"
	}
	return "Not connected"
}

func newGrantView(st *auth.GrantStatus) *grantView {
	g := &grantView{State: "not-connected", Scopes: st.Scopes, ExpiresAt: st.ExpiresAt, UpdatedAt: st.UpdatedAt}
	switch {
	case st.Connected:
		g.State = "connected"
	case st.Status == auth.StatusReconnectRequired:
		g.State = "reconnect"
	}
	return g
}

// memberGrant is one row of the admins' table of everyone's grant.
type memberGrant struct {
	Email, UserID string
	Grant         *grantView
	Problem       *errorData
}

// fillGrants reads the viewer's own grant and, for admins, the grant of
// each of people (the tenant's members).
func (c *Console) fillGrants(ctx context.Context, t *tenants.Tenant, v *Viewer, d *instanceData, people []members.Member) {
	if c.cfg.Grants == nil {
		d.OwnProblem = problemData(errNoGrants)
		return
	}
	if st, err := c.cfg.Grants.Status(ctx, t.Slug, d.Slug, v.Session.UserID); err != nil {
		d.OwnProblem = problemData(err)
	} else {
		d.Own = newGrantView(st)
	}
	if !d.Admin {
		return
	}
	for _, m := range people {
		row := memberGrant{Email: m.Email, UserID: m.UserID}
		if st, err := c.cfg.Grants.Status(ctx, t.Slug, d.Slug, m.UserID); err != nil {
			row.Problem = problemData(err)
		} else {
			row.Grant = newGrantView(st)
		}
		d.Others = append(d.Others, row)
	}
}

// connectData is the page between Connect and the provider: where the
// browser goes to sign in.
type connectData struct {
	Slug, ConnectorName string
	AuthorizeURL        string
	// Host is the authorization server's host, named on the button.
	Host string
}

func (d connectData) title() string { return "Connect " + d.ConnectorName }

// connectGrant starts the viewer's own OAuth flow on the instance: the
// flow's browser-binding cookie is set, and the page links to the
// provider's authorize URL. A link rather than a redirect: the console's
// CSP (form-action 'self') forbids a form's redirect to another origin.
// After consent the provider returns to the flow's callback, whose page
// leads back to the instance page.
func (c *Console) connectGrant(ec echo.Context, v *Viewer) error {
	d, t, err := c.instanceAction(ec, v, false)
	if err != nil {
		return err
	}
	if c.cfg.Grants == nil {
		return c.refuse(ec, v, d, errNoGrants)
	}
	flow, err := c.cfg.Grants.Connect(ec.Request().Context(), t.Slug, d.Slug, v.Session.UserID)
	if err != nil {
		return c.refuse(ec, v, d, err)
	}
	u, err := url.Parse(flow.AuthorizeURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return c.refuse(ec, v, d, switchboard.E(switchboard.ErrInvalid, "invalid_config",
			"the instance's authorize URL is not an http(s) URL: an admin must correct it"))
	}
	ec.SetCookie(&http.Cookie{
		Name: flow.CookieName, Value: flow.Binding, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: c.cfg.Grants.Secure(), Expires: flow.ExpiresAt,
	})
	c.render(ec, http.StatusOK, "instance-connect", v, connectData{Slug: d.Slug, ConnectorName: d.ConnectorName,
		AuthorizeURL: flow.AuthorizeURL, Host: u.Host})
	return nil
}

// disconnectGrant revokes and deletes the viewer's own grant, records
// it in the audit log as the admin API does, and goes back to the
// instance page.
func (c *Console) disconnectGrant(ec echo.Context, v *Viewer) error {
	d, t, err := c.instanceAction(ec, v, false)
	if err != nil {
		return err
	}
	if c.cfg.Grants == nil {
		return c.refuse(ec, v, d, errNoGrants)
	}
	res, err := c.cfg.Grants.Disconnect(ec.Request().Context(), t.Slug, d.Slug, v.Session.UserID)
	if err != nil {
		return c.refuse(ec, v, d, err)
	}
	if c.cfg.AuditLog != nil {
		c.cfg.AuditLog.Record(audit.Entry{Tenant: t.ID, Instance: d.Slug, Actor: v.Session.UserID, Subject: v.Session.UserID,
			Tool: "admin", Action: "grant.disconnect", Outcome: "ok"})
		if res.RevokeFailed != "" { // the provider kept the token: audited as the admin API does
			c.cfg.AuditLog.Record(audit.Entry{Tenant: t.ID, Instance: d.Slug, Actor: v.Session.UserID, Subject: v.Session.UserID,
				Tool: "admin", Action: "grant.revoke", Outcome: res.RevokeFailed})
		}
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"instances/"+d.Slug+"?done=disconnected")
}
