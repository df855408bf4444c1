package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
)

// Grants runs a user's own per-user OAuth grant actions on an instance;
// *connectflow.Grants is one.
type Grants interface {
	Status(ctx context.Context, tenantSlug, instanceSlug, user string) (*auth.GrantStatus, error)
	Connect(ctx context.Context, tenantSlug, instanceSlug, user string) (*auth.Flow, error)
	// Disconnect deletes user's grant, revoking it at the provider first
	// when the connector declares a revocation endpoint (best effort).
	Disconnect(ctx context.Context, tenantSlug, instanceSlug, user string) (auth.Disconnected, error)
	// Secure reports whether flow cookies must be Secure.
	Secure() bool
}

var errNoGrants = switchboard.E(switchboard.ErrUnavailable, "oauth_unavailable", "OAuth flows are not enabled on this server")

var errNoSelf = switchboard.E(switchboard.ErrInvalid, "user_required",
	"this credential acts as no user: name one with ?user_id= (operator and admins), or use a member's own credential")

// selfUser is the user a needSelf route acts for: the principal's own
// user; the operator, owners and admins may name another with ?user_id=.
// A member naming anyone but themself is refused: members never see other
// users' grants or rows.
func selfUser(c echo.Context) (string, error) {
	p := principalOf(c)
	named := c.QueryParam("user_id")
	switch {
	case named != "" && named != p.UserID && !p.admin():
		return "", errRole
	case named != "":
		return named, nil
	case p.UserID == "":
		return "", errNoSelf
	}
	return p.UserID, nil
}

func (s *Server) grantStatus(c echo.Context) error {
	if s.cfg.Grants == nil {
		return errNoGrants
	}
	user, err := selfUser(c)
	if err != nil {
		return err
	}
	st, err := s.cfg.Grants.Status(c.Request().Context(), c.Param("tenant"), c.Param("instance"), user)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) grantConnect(c echo.Context) error {
	if s.cfg.Grants == nil {
		return errNoGrants
	}
	user, err := selfUser(c)
	if err != nil {
		return err
	}
	flow, err := s.cfg.Grants.Connect(c.Request().Context(), c.Param("tenant"), c.Param("instance"), user)
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name: flow.CookieName, Value: flow.Binding, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: s.cfg.Grants.Secure(), Expires: flow.ExpiresAt,
	})
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]any{"authorize_url": flow.AuthorizeURL, "expires_at": flow.ExpiresAt})
}

func (s *Server) grantDisconnect(c echo.Context) error {
	if s.cfg.Grants == nil {
		return errNoGrants
	}
	user, err := selfUser(c)
	if err != nil {
		return err
	}
	d, err := s.cfg.Grants.Disconnect(c.Request().Context(), c.Param("tenant"), c.Param("instance"), user)
	if err != nil {
		return err
	}
	if t, err := s.pathTenant(c); err == nil {
		s.recordDisconnect(principalOf(c).Actor, t.ID, c.Param("instance"), user, d)
	}
	s.logger(c).Info("oauth grant disconnected", "tenant", c.Param("tenant"), "instance", c.Param("instance"), "actor", principalOf(c).Actor)
	return c.JSON(http.StatusOK, map[string]any{"connected": false})
}

// recordDisconnect audits a disconnected grant: the disconnect, and a
// revocation the provider did not accept (outcome: its error code).
func (s *Server) recordDisconnect(actor string, tenant switchboard.TenantID, instance, user string, d auth.Disconnected) {
	s.recordAs(actor, tenant, instance, user, "grant.disconnect")
	if d.RevokeFailed != "" {
		s.recordOutcome(actor, tenant, instance, user, "grant.revoke", d.RevokeFailed)
	}
}
