package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
)

// pageQuery reads the limit and cursor of a list request
// (switchboard.ParsePageQuery: a bad limit is invalid_limit).
func pageQuery(c echo.Context) (switchboard.PageQuery, error) {
	return switchboard.ParsePageQuery(c.QueryParam("limit"), c.QueryParam("cursor"))
}

// listPage answers one page of a list: body (the rows under the key they
// had before lists paged, and whatever else the list says), and
// next_cursor when there is a next page.
func listPage(c echo.Context, body map[string]any, next string) error {
	if next != "" {
		body["next_cursor"] = next
	}
	return c.JSON(http.StatusOK, body)
}

// tenantPage answers one page of a list of the path's tenant, its rows
// under key.
func tenantPage[T any](s *Server, c echo.Context, key string,
	page func(context.Context, switchboard.TenantID, switchboard.PageQuery) ([]T, string, error)) error {
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	q, err := pageQuery(c)
	if err != nil {
		return err
	}
	list, next, err := page(c.Request().Context(), t.ID, q)
	if err != nil {
		return err
	}
	return listPage(c, map[string]any{key: list}, next)
}
