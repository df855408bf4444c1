package console

import (
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
)

// pager is the links under a paged console list: plain GET links, the
// next one carrying the cursor of the next page.
type pager struct {
	// First is the URL of the first page; empty on the first page.
	First string
	// Next is the URL of the next page; empty on the last page.
	Next string
}

// pageOf is the page of a list the request asks for: the default number
// of rows after the cursor in the query parameter param (the first page
// when there is none, as after a POST).
func pageOf(ec echo.Context, param string) switchboard.PageQuery {
	return switchboard.PageQuery{Cursor: ec.QueryParam(param)}
}

// pagerOf is the links of the list at path that was read with pageOf(ec,
// param) and whose next page starts at next.
func pagerOf(ec echo.Context, path, param, next string) pager {
	var p pager
	if ec.QueryParam(param) != "" {
		p.First = path
	}
	if next != "" {
		p.Next = path + "?" + url.Values{param: {next}}.Encode()
	}
	return p
}
