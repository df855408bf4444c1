package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/secrets"
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
	key, token, err := s.CreateAPIKey(c.Request().Context(), principalOf(c).Actor, t, req)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, CreatedAPIKey{APIKey: key, Key: token.Reveal()})
}

// CreateAPIKey issues a tenant API key for req, created by actor, with its
// audit row; the key itself is returned this once. The console's API keys
// page creates keys through it, as the /v1 route does.
func (s *Server) CreateAPIKey(ctx context.Context, actor string, t *tenants.Tenant, req tenants.APIKeyRequest) (*tenants.APIKey, secrets.Secret, error) {
	if s.cfg.APIKeys == nil {
		return nil, secrets.Secret{}, errNoAPIKeys
	}
	key, token, err := s.cfg.APIKeys.Create(ctx, t.ID, req, actor)
	if err != nil {
		return nil, secrets.Secret{}, err
	}
	s.recordAs(actor, t.ID, "", key.ID, "api_key.create:"+string(key.Role))
	s.loggerOf(ctx).Info("tenant API key created", "tenant", t.Slug, "key", key.ID, "role", string(key.Role), "actor", actor)
	return key, token, nil
}

func (s *Server) listAPIKeys(c echo.Context) error {
	if s.cfg.APIKeys == nil {
		return errNoAPIKeys
	}
	return tenantPage(s, c, "api_keys", s.cfg.APIKeys.Page)
}

func (s *Server) revokeAPIKey(c echo.Context) error {
	if s.cfg.APIKeys == nil {
		return errNoAPIKeys
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	key, err := s.RevokeAPIKey(c.Request().Context(), principalOf(c).Actor, t, c.Param("key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, key)
}

// RevokeAPIKey revokes one of the tenant's API keys for actor, with its
// audit row (the /v1 route and the console's API keys page).
func (s *Server) RevokeAPIKey(ctx context.Context, actor string, t *tenants.Tenant, id string) (*tenants.APIKey, error) {
	if s.cfg.APIKeys == nil {
		return nil, errNoAPIKeys
	}
	key, err := s.cfg.APIKeys.Revoke(ctx, t.ID, id)
	if err != nil {
		return nil, err
	}
	s.recordAs(actor, t.ID, "", key.ID, "api_key.revoke")
	s.loggerOf(ctx).Info("tenant API key revoked", "tenant", t.Slug, "key", key.ID, "actor", actor)
	return key, nil
}
