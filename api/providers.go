package api

import (
	"context"
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
	v, created, err := s.PutProvider(c.Request().Context(), actorOf(c), c.Param("provider"), req)
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
	q, err := pageQuery(c)
	if err != nil {
		return err
	}
	list, next, err := s.cfg.Providers.Page(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return listPage(c, map[string]any{"providers": list, "callback_url": s.cfg.Providers.CallbackURL()}, next)
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
	if err := s.DeleteProvider(c.Request().Context(), actorOf(c), c.Param("provider")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// The central providers belong to no tenant: their changes are audit
// rows without one (the operator's own log), with the provider's slug as
// subject. No client id or secret is ever part of a row.

// PutProvider registers or replaces a central OAuth provider as PUT
// /v1/providers/{provider} does, and records the change with actor.
func (s *Server) PutProvider(ctx context.Context, actor, slug string, req auth.ProviderRequest) (*auth.ProviderView, bool, error) {
	if s.cfg.Providers == nil {
		return nil, false, errNoProviders
	}
	v, created, err := s.cfg.Providers.Put(ctx, slug, req)
	if err != nil {
		return v, created, err
	}
	action := "provider.replace"
	if created {
		action = "provider.create"
	}
	s.recordAs(actor, "", "", slug, action)
	return v, created, nil
}

// DeleteProvider deletes a central OAuth provider as DELETE
// /v1/providers/{provider} does, and records the change with actor.
func (s *Server) DeleteProvider(ctx context.Context, actor, slug string) error {
	if s.cfg.Providers == nil {
		return errNoProviders
	}
	if err := s.cfg.Providers.Delete(ctx, slug); err != nil {
		return err
	}
	s.recordAs(actor, "", "", slug, "provider.delete")
	return nil
}
