package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/secrets"
)

// UserSettingsRequest is the body of PUT
// /v1/tenants/{tenant}/instances/{instance}/settings: the caller's own
// values of the instance's user-scope fields, by name; null or "" clears
// one, fields not named are kept.
type UserSettingsRequest struct {
	Fields map[string]*secrets.Secret `json:"fields"`
}

var errNotOwnSettings = switchboard.E(switchboard.ErrForbidden, "own_settings_only",
	"user settings are read and written by their own user only: no role may name another user")

// ownUser is the user of a settings route: always the principal's own.
// Unlike selfUser, no role may name another user: a user's own values of
// user-scope fields are never shown to, or set by, anyone else (admins
// and the operator included).
func ownUser(c echo.Context) (string, error) {
	p := principalOf(c)
	if named := c.QueryParam("user_id"); named != "" && named != p.UserID {
		return "", errNotOwnSettings
	}
	if p.UserID == "" {
		return "", errNoSelf
	}
	return p.UserID, nil
}

func (s *Server) getUserSettings(c echo.Context) error {
	user, err := ownUser(c)
	if err != nil {
		return err
	}
	v, err := s.cfg.Tenants.UserSettings(c.Request().Context(), c.Param("tenant"), c.Param("instance"), user)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, v)
}

func (s *Server) putUserSettings(c echo.Context) error {
	user, err := ownUser(c)
	if err != nil {
		return err
	}
	var req UserSettingsRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	v, err := s.cfg.Tenants.SetUserSettings(c.Request().Context(), c.Param("tenant"), c.Param("instance"), user, req.Fields)
	if err != nil {
		return err
	}
	if t, err := s.pathTenant(c); err == nil {
		s.recordAs(principalOf(c).Actor, t.ID, c.Param("instance"), user, "settings.set")
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, v)
}

func (s *Server) deleteUserSettings(c echo.Context) error {
	user, err := ownUser(c)
	if err != nil {
		return err
	}
	if err := s.cfg.Tenants.DeleteUserSettings(c.Request().Context(), c.Param("tenant"), c.Param("instance"), user); err != nil {
		return err
	}
	if t, err := s.pathTenant(c); err == nil {
		s.recordAs(principalOf(c).Actor, t.ID, c.Param("instance"), user, "settings.delete")
	}
	return c.NoContent(http.StatusNoContent)
}
