package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/tenants"
)

// CreatedAPIKey answers POST /v1/tenants/{tenant}/api-keys: the key's
// record and, this once, the key itself.
type CreatedAPIKey struct {
	*tenants.APIKey
	Key string `json:"key"`
}

var errNoAPIKeys = switchboard.E(switchboard.ErrUnavailable, "api_keys_unavailable", "tenant API keys are not enabled on this server")

// pathTenant returns the tenant of the route's path.
func (s *Server) pathTenant(c echo.Context) (*tenants.Tenant, error) {
	return s.cfg.Tenants.Tenant(c.Request().Context(), c.Param("tenant"))
}

func (s *Server) createAPIKey(c echo.Context) error {
	if s.cfg.APIKeys == nil {
		return errNoAPIKeys
	}
	var req tenants.APIKeyRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	key, token, err := s.cfg.APIKeys.Create(c.Request().Context(), t.ID, req, principalOf(c).Actor)
	if err != nil {
		return err
	}
	s.record(c, t.ID, "", key.ID, "api_key.create:"+string(key.Role))
	s.logger(c).Info("tenant API key created", "tenant", t.Slug, "key", key.ID, "role", string(key.Role), "actor", principalOf(c).Actor)
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, CreatedAPIKey{APIKey: key, Key: token.Reveal()})
}

func (s *Server) listAPIKeys(c echo.Context) error {
	if s.cfg.APIKeys == nil {
		return errNoAPIKeys
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	list, err := s.cfg.APIKeys.List(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"api_keys": list})
}

func (s *Server) revokeAPIKey(c echo.Context) error {
	if s.cfg.APIKeys == nil {
		return errNoAPIKeys
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	key, err := s.cfg.APIKeys.Revoke(c.Request().Context(), t.ID, c.Param("key"))
	if err != nil {
		return err
	}
	s.record(c, t.ID, "", key.ID, "api_key.revoke")
	s.logger(c).Info("tenant API key revoked", "tenant", t.Slug, "key", key.ID, "actor", principalOf(c).Actor)
	return c.JSON(http.StatusOK, key)
}
