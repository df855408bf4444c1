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
func (c *Console) home(ec echo.Context, v *Viewer) error {
	if v.Operator() {
		return ec.Redirect(http.StatusFound, OperatorHome)
	}
	return ec.Redirect(http.StatusFound, Prefix+"instances")
}

// signInData is the Sign in page: where to go back to, why the previous
// session ended, if it did, and the identity providers to sign in with.
type signInData struct {
	Next string
	// Problem is the typed error of a session that is no longer valid.
	Problem *errorData
	// Issuers are the "Sign in with <name>" buttons, each starting a
	// sign-in that returns to Next.
	Issuers []issuerButton
}

// issuerButton is one identity provider's sign-in button.
type issuerButton struct{ Name, URL string }

func (signInData) title() string { return "Sign in" }

// signInData is the Sign in page of a request that returns to next (a
// console path; else the console's home) once signed in; err is why the
// session it brought is not valid, if it is not. ?tenant= is carried to
// the identity providers' start URLs.
func (c *Console) signInData(ec echo.Context, next string, err error) signInData {
	d := signInData{}
	back := Prefix
	if next != "" {
		d.Next = safeNext(next)
		back = d.Next
	}
	if err != nil {
		d.Problem = problemData(err)
	}
	for _, i := range c.cfg.Issuers {
		d.Issuers = append(d.Issuers, issuerButton{Name: i.Name, URL: i.StartURLFor(ec.QueryParam("tenant"), back)})
	}
	return d
}

// signIn shows how to sign in: one button per identity provider, and the
// one-time sign-in links an owner or the operator creates.
func (c *Console) signIn(ec echo.Context) error {
	v, err := c.viewer(ec)
	c.render(ec, http.StatusOK, "signin", v, c.signInData(ec, ec.QueryParam("next"), err))
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
