package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
)

func (s *Server) listAudit(c echo.Context) error {
	if s.cfg.Audit == nil {
		return switchboard.E(switchboard.ErrUnavailable, "audit_unavailable", "the audit log is not enabled on this server")
	}
	ctx := c.Request().Context()
	t, err := s.cfg.Tenants.Tenant(ctx, c.Param("tenant"))
	if err != nil {
		return err
	}
	q := audit.Query{Instance: c.QueryParam("instance")}
	if p := principalOf(c); !p.admin() || c.QueryParam("user_id") != "" {
		// Members see their own rows only (needSelf).
		if q.User, err = selfUser(c); err != nil {
			return err
		}
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return switchboard.E(switchboard.ErrInvalid, "invalid_limit", "limit must be an integer from 1 to 1000")
		}
		q.Limit = n
	}
	if v := c.QueryParam("before"); v != "" {
		ts, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return switchboard.E(switchboard.ErrInvalid, "invalid_before", "before must be an RFC 3339 time")
		}
		q.Before = ts
	}
	entries, err := s.cfg.Audit.List(ctx, t.ID, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"entries": entries})
}
