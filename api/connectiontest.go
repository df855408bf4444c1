package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/gateway"
)

// Tester runs an app instance's connection test (testAuth);
// *gateway.Gateway is one.
type Tester interface {
	Test(ctx context.Context, tenant, instance, user string) (*gateway.TestResult, error)
}

// TestRequest is the optional body of POST
// /v1/tenants/{tenant}/instances/{instance}/test: the user whose grant a
// per-user instance is tested with.
type TestRequest struct {
	UserID string `json:"user_id,omitempty"`
}

func (s *Server) testInstance(c echo.Context) error {
	if s.cfg.Tester == nil {
		return switchboard.E(switchboard.ErrUnavailable, "test_unavailable", "instance tests are not enabled on this server")
	}
	var req TestRequest
	if c.Request().ContentLength != 0 {
		if err := decode(c, &req); err != nil {
			return err
		}
	}
	res, err := s.cfg.Tester.Test(c.Request().Context(), c.Param("tenant"), c.Param("instance"), req.UserID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}
