package console

import (
	"errors"
	"html/template"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
)

// templateFuncs are the functions templates call.
var templateFuncs = template.FuncMap{
	"typeLabel": func(t string) string {
		if l, ok := typeLabels[t]; ok {
			return l
		}
		return t
	},
	"modeLabel": func(m string) string {
		if l, ok := modeLabels[m]; ok {
			return l
		}
		return m
	},
	"static":     func(name string) string { return StaticPrefix + name },
	"statusText": http.StatusText,
}

// home is the console's start page: the tenant's instances, whose empty
// state leads to the catalog.
func (c *Console) home(ec echo.Context, _ *Viewer) error {
	return ec.Redirect(http.StatusFound, Prefix+"instances")
}

// signInData is the Sign in page: where to go back to, and why the
// previous session ended, if it did.
type signInData struct {
	Next string
	// Problem is the typed error of a session that is no longer valid.
	Problem *errorData
}

func (signInData) title() string { return "Sign in" }

// signIn shows how to sign in. The one-time links and OpenID Connect
// land with the sign-in pages; until then a session is established by a
// sign-in link an owner or the operator creates.
func (c *Console) signIn(ec echo.Context) error {
	v, err := c.viewer(ec)
	d := signInData{}
	if err != nil {
		d.Problem = problemData(err)
	}
	c.render(ec, http.StatusOK, "signin", v, d)
	return nil
}

// problemData renders err through the error table.
func problemData(err error) *errorData {
	p := switchboard.ProblemOf(err)
	return &errorData{Status: p.Status, Code: p.Detail.Code, Message: p.Detail.Message, Hint: hintOf(err)}
}

// unauthorized reports whether err is a credential that is no longer
// valid, which shows Sign in rather than an error page.
func unauthorized(err error) bool { return errors.Is(err, switchboard.ErrUnauthorized) }

// safeNext returns next when it is a console path, for the Sign in
// page's "continue" link, and Prefix otherwise (no open redirect).
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix) && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return Prefix
}
