package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
)

var errNoProviders = switchboard.E(switchboard.ErrUnavailable, "providers_unavailable", "the provider registry is not enabled on this server")

func (s *Server) putProvider(c echo.Context) error {
	if s.cfg.Providers == nil {
		return errNoProviders
	}
	var req auth.ProviderRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	v, created, err := s.cfg.Providers.Put(c.Request().Context(), c.Param("provider"), req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, v)
}

func (s *Server) listProviders(c echo.Context) error {
	if s.cfg.Providers == nil {
		return errNoProviders
	}
	list, err := s.cfg.Providers.List(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"providers": list, "callback_url": s.cfg.Providers.CallbackURL()})
}

func (s *Server) getProvider(c echo.Context) error {
	if s.cfg.Providers == nil {
		return errNoProviders
	}
	v, err := s.cfg.Providers.View(c.Request().Context(), c.Param("provider"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) deleteProvider(c echo.Context) error {
	if s.cfg.Providers == nil {
		return errNoProviders
	}
	if err := s.cfg.Providers.Delete(c.Request().Context(), c.Param("provider")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
