package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/admission"
)

var errNoLimits = switchboard.E(switchboard.ErrUnavailable, "unavailable", "call limits are not kept by this server")

// getLimits answers the tenant's call limits: the operator's, its own and
// those in force.
func (s *Server) getLimits(c echo.Context) error {
	if s.cfg.Limits == nil {
		return errNoLimits
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	v, err := s.cfg.Limits.Tenant(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// putLimits sets the tenant's own call limits, within the operator's
// (invalid_limits otherwise); zero fields keep the operator's.
func (s *Server) putLimits(c echo.Context) error {
	if s.cfg.Limits == nil {
		return errNoLimits
	}
	var req admission.Limits
	if err := decode(c, &req); err != nil {
		return err
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	v, err := s.cfg.Limits.SetTenant(c.Request().Context(), t.ID, req)
	if err != nil {
		return err
	}
	s.recordAs(actorOf(c), t.ID, "", "", "limits.set")
	return c.JSON(http.StatusOK, v)
}
