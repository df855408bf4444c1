package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
)

// listAudit answers one page of the tenant's audit rows, newest first:
// {"entries": [...], "next_cursor": "..."}; ?cursor=<next_cursor> gives
// the next (older) page and prev_cursor the newer one. The former
// ?before=<RFC 3339 time> is still accepted.
func (s *Server) listAudit(c echo.Context) error {
	if s.cfg.Audit == nil {
		return errNoAudit
	}
	ctx := c.Request().Context()
	t, err := s.cfg.Tenants.Tenant(ctx, c.Param("tenant"))
	if err != nil {
		return err
	}
	q, err := auditFilters(c)
	if err != nil {
		return err
	}
	if p := principalOf(c); !p.admin() || c.QueryParam("user_id") != "" {
		// Members see their own rows only (needSelf).
		if q.User, err = selfUser(c); err != nil {
			return err
		}
	}
	pq, err := pageQuery(c)
	if err != nil {
		return err
	}
	q.Limit = pq.Size()
	// The audit log's own (time, id) cursor travels inside one of the
	// API's, which names the tenant, so that a cursor of another list or
	// tenant is refused like on every other list.
	scope := "audit:" + string(t.ID)
	if inner, err := pq.After(scope, 1); err != nil {
		return err
	} else if inner != nil {
		q.Cursor = inner[0]
	}
	if v := c.QueryParam("before"); v != "" {
		ts, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return switchboard.E(switchboard.ErrInvalid, "invalid_before", "before must be an RFC 3339 time")
		}
		q.Before = ts
	}
	page, err := s.cfg.Audit.Page(ctx, t.ID, q)
	if err != nil {
		return err
	}
	for _, cur := range []*string{&page.Older, &page.Newer} {
		if *cur != "" {
			*cur = switchboard.NextCursor(scope, *cur)
		}
	}
	return c.JSON(http.StatusOK, page)
}

// auditFilters reads the filters the audit listing and its export share
// besides the user: instance, agent, outcome, from and to (RFC 3339).
func auditFilters(c echo.Context) (audit.Query, error) {
	q := audit.Query{Instance: c.QueryParam("instance"), Agent: c.QueryParam("agent"), Outcome: c.QueryParam("outcome")}
	for _, f := range []struct {
		key string
		at  *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if v := c.QueryParam(f.key); v != "" {
			ts, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return q, switchboard.E(switchboard.ErrInvalid, "invalid_time", "%s must be an RFC 3339 time", f.key)
			}
			*f.at = ts
		}
	}
	return q, nil
}

// exportAudit streams the tenant's audit rows as NDJSON (one row a line,
// newest first), every row the filters keep, read a page at a time: for
// archiving before retention deletes them. A failure once rows are sent
// aborts the response, so that a client never takes a cut stream for the
// whole.
func (s *Server) exportAudit(c echo.Context) error {
	if s.cfg.Audit == nil {
		return errNoAudit
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	q, err := auditFilters(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	res.Header().Set("Content-Disposition", `attachment; filename="audit-`+t.Slug+`.ndjson"`)
	res.WriteHeader(http.StatusOK)
	if _, err := s.cfg.Audit.Export(ctx, t.ID, q, res, res.Flush); err != nil {
		s.logger(c).Warn("audit export cut short", "tenant", string(t.ID), "err", err.Error())
		panic(http.ErrAbortHandler)
	}
	return nil
}

var errNoAudit = switchboard.E(switchboard.ErrUnavailable, "audit_unavailable", "the audit log is not enabled on this server")

// getAuditRetention answers how long the tenant's audit rows are kept.
func (s *Server) getAuditRetention(c echo.Context) error {
	if s.cfg.Audit == nil {
		return errNoAudit
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	r, err := s.cfg.Audit.TenantRetention(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// putAuditRetention sets how long the tenant's audit rows are kept:
// {"days": N}, at most the operator's retention; 0 keeps the operator's.
func (s *Server) putAuditRetention(c echo.Context) error {
	if s.cfg.Audit == nil {
		return errNoAudit
	}
	var req struct {
		Days *int `json:"days"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Days == nil {
		return switchboard.E(switchboard.ErrInvalid, "invalid_retention", "days is required (0 keeps the operator's retention)")
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := s.cfg.Audit.SetTenantRetention(ctx, t.ID, *req.Days); err != nil {
		return err
	}
	s.recordAs(actorOf(c), t.ID, "", "", "audit.retention")
	r, err := s.cfg.Audit.TenantRetention(ctx, t.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// tenantUsage answers the tenant's agent calls over a span of days
// (?from, ?to: YYYY-MM-DD, inclusive; default the last 30 days), grouped
// by ?by=day,instance,agent,outcome, from the usage rollup.
func (s *Server) tenantUsage(c echo.Context) error {
	if s.cfg.Audit == nil {
		return errNoAudit
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	q, err := audit.ParseUsageQuery(c.QueryParam("from"), c.QueryParam("to"), c.QueryParam("by"))
	if err != nil {
		return err
	}
	u, err := s.cfg.Audit.Usage(c.Request().Context(), t.ID, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

// usageByTenant answers every tenant's agent calls over a span of days
// (?from, ?to as for a tenant's usage), one page of tenants by id
// (?limit, ?cursor, next_cursor).
func (s *Server) usageByTenant(c echo.Context) error {
	if s.cfg.Audit == nil {
		return errNoAudit
	}
	q, err := audit.ParseUsageQuery(c.QueryParam("from"), c.QueryParam("to"), "")
	if err != nil {
		return err
	}
	pq, err := pageQuery(c)
	if err != nil {
		return err
	}
	after := ""
	if keys, err := pq.After("usage", 1); err != nil {
		return err
	} else if keys != nil {
		after = keys[0]
	}
	list, from, to, more, err := s.cfg.Audit.UsageByTenant(c.Request().Context(), q, after, pq.Size())
	if err != nil {
		return err
	}
	next := ""
	if more {
		next = switchboard.NextCursor("usage", string(list[len(list)-1].Tenant))
	}
	return listPage(c, map[string]any{"from": from, "to": to, "tenants": list}, next)
}
