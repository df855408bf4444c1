// Package console is Switchboard's web console: server-rendered HTML
// pages under /console/, built from html/template and a stylesheet
// embedded in the binary (go:embed), so that the console needs no extra
// process, no build step and no script. Every page carries the same
// security headers (a CSP without inline script or style, no framing, no
// referrer) and is shown only to the viewer that the one access check,
// Config.Access, establishes; everyone else gets the Sign in page.
//
// See docs/console.md for why the console is server-rendered and how a
// page is added.
package console

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/api"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/connectflow"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
)

// Prefix is the path every console page lives under.
const Prefix = "/console/"

// StaticPrefix is the path of the embedded stylesheet and images.
const StaticPrefix = Prefix + "static/"

// SignInPath is the console's Sign in page.
const SignInPath = Prefix + "signin"

// contentSecurityPolicy allows nothing but the console's own files: no
// inline script or style (templates use classes only), no framing, forms
// that post only to the server itself.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config is what a Console is built from.
type Config struct {
	// Catalog is the connector catalog the catalog pages show.
	Catalog *registry.Catalog
	// Tenants holds the tenants' instances the instance pages show and
	// change.
	Tenants *tenants.Service
	// PublicURL is the server's public base URL (MCP endpoint URLs).
	PublicURL string
	// Audit is the audit log the audit page reads; nil shows
	// audit_unavailable.
	Audit *audit.Store
	// Access establishes the viewer of a request; nil admits nobody (every
	// page but Sign in then shows Sign in).
	Access Access
	// Logger receives the causes of internal errors; nil discards them.
	Logger *slog.Logger
	// APIKeys stores the tenant API keys the API keys page lists; nil
	// (or nil Members or Admin) answers the people pages with 503.
	APIKeys *tenants.APIKeys
	// Members keeps the members and invitations the Members page shows.
	Members *members.Store
	// Admin makes the people pages' changes as the /v1 API makes them
	// (the same domain calls and audit rows): API keys, invitations and
	// member removals.
	Admin *api.Server
	// Tester runs an instance's connection test (Test connection on the
	// instance page); nil answers test_unavailable.
	Tester Tester
	// Grants runs the signed-in member's own per-user OAuth grant actions
	// (connect, status, disconnect); nil answers oauth_unavailable.
	Grants *connectflow.Grants
	// Providers is the platform's OAuth provider registry: the install
	// form preselects oauthCentral when the connector's provider is
	// registered. Nil: no provider is.
	Providers *auth.Providers
	// RedirectURI is an instance's exact OAuth redirect URI by mode
	// (auth.OAuth.RedirectURI), shown on the install form for mode oauth.
	RedirectURI func(mode, tenantSlug, instanceSlug string) string
	// AuditLog records the console's own actions (a disconnected grant).
	AuditLog *audit.Writer
	// Issuers are the OpenID Connect issuers the Sign in page offers a
	// "Sign in with <name>" button for (signin.Handler.Issuers); none,
	// it offers one-time sign-in links only.
	Issuers []signin.IssuerLink
	// SignIn switches a session to another tenant (the tenant picker);
	// nil, or nil Members, answers the picker with 503.
	SignIn *signin.Handler
	// Operators keeps the operator tokens the operator's pages list,
	// create and revoke.
	Operators *auth.Operators
}

// Console serves the console's pages.
type Console struct {
	cfg    Config
	logger *slog.Logger
	pages  map[string]*template.Template
	static http.Handler
}

// New parses the embedded templates; it fails only when a template does
// not parse, which the package's tests rule out.
func New(cfg Config) (*Console, error) {
	if cfg.Catalog == nil || cfg.Tenants == nil {
		return nil, errors.New("console: no catalog or tenant service")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, logger: logger, pages: map[string]*template.Template{}}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")
		if page == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(templateFuncs).ParseFS(templateFiles, "templates/layout.html", name)
		if err != nil {
			return nil, err
		}
		c.pages[page] = t
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix(StaticPrefix, http.FileServerFS(static))
	return c, nil
}

// Mount adds the console's routes to e, the server's router. Every route
// under Prefix answers with the console's security headers, and paths
// the console does not know get its own Not found page rather than the
// API's JSON.
func (c *Console) Mount(e *echo.Echo) {
	g := e.Group(strings.TrimSuffix(Prefix, "/"), c.headers)
	g.GET("", func(ec echo.Context) error {
		return ec.Redirect(http.StatusFound, Prefix)
	})
	g.GET("/", c.page(c.home))
	g.GET("/signin", c.signIn)
	g.GET("/static/*", func(ec echo.Context) error {
		c.static.ServeHTTP(ec.Response(), ec.Request())
		return nil
	})
	g.GET("/catalog", c.page(c.catalogList))
	g.GET("/catalog/:connector", c.page(c.connectorPage))
	g.GET("/catalog/:connector/icon/:size", c.page(c.connectorIcon))
	g.GET("/catalog/:connector/install", c.page(c.installForm))
	g.POST("/catalog/:connector/install", c.page(c.install))
	g.GET("/instances", c.page(c.instanceList))
	g.GET("/instances/:instance", c.page(c.instancePage))
	// People: callers, tenant API keys, members and invitations
	// (console/callers.go, console/members.go).
	g.GET("/callers", c.page(c.callerList))
	g.POST("/callers", c.page(c.createCaller))
	g.POST("/callers/:caller/revoke", c.page(c.revokeCaller))
	g.GET("/api-keys", c.page(c.apiKeyList))
	g.POST("/api-keys", c.page(c.createAPIKey))
	g.POST("/api-keys/:key/revoke", c.page(c.revokeAPIKey))
	g.GET("/members", c.page(c.memberList))
	g.POST("/members/invitations", c.page(c.invite))
	g.POST("/members/invitations/:invitation/revoke", c.page(c.revokeInvitation))
	g.POST("/members/:user/role", c.page(c.setRole))
	g.GET("/members/:user/remove", c.page(c.removeConfirm))
	g.POST("/members/:user/remove", c.page(c.removeMember))
	// Audit: the tenant's agent calls (a member's own), filters, paging,
	// CSV export.
	g.GET("/audit", c.page(c.auditPage))
	g.GET("/audit.csv", c.page(c.auditCSV))
	// The instance page's actions (instance_page.go, instance_grants.go).
	g.POST("/instances/:instance/agents", c.page(c.editAgents))
	g.POST("/instances/:instance/tools-mode", c.page(c.setToolsMode))
	g.POST("/instances/:instance/test", c.page(c.testConnection))
	g.GET("/instances/:instance/delete", c.page(c.confirmDelete))
	g.POST("/instances/:instance/delete", c.page(c.deleteInstance))
	g.POST("/instances/:instance/connect", c.page(c.connectGrant))
	g.POST("/instances/:instance/disconnect", c.page(c.disconnectGrant))
	g.GET("/instances/:instance/settings", c.page(c.settingsPage))
	g.POST("/instances/:instance/settings", c.page(c.saveSettings))
	// Tenant picker: the tenants this identity may switch to.
	g.GET("/tenants", c.page(c.tenantPicker))
	g.POST("/tenants/switch", c.page(c.switchTenant))
	// The platform operator's pages (operator.go): an operator session
	// only; anyone else gets Access restricted, on every URL under them.
	g.GET("/operator/tenants", c.operatorPage(c.operatorTenants))
	g.POST("/operator/tenants", c.operatorPage(c.createTenant))
	g.POST("/operator/tenants/invite", c.operatorPage(c.inviteOwner))
	g.GET("/operator/providers", c.operatorPage(c.operatorProviders))
	g.POST("/operator/providers", c.operatorPage(c.putProvider))
	g.POST("/operator/providers/:provider/delete", c.operatorPage(c.deleteProvider))
	g.GET("/operator/tokens", c.operatorPage(c.operatorTokens))
	g.POST("/operator/tokens", c.operatorPage(c.createOperatorToken))
	g.POST("/operator/tokens/:token/revoke", c.operatorPage(c.revokeOperatorToken))
	g.Any("/operator/*", c.operatorPage(c.operatorNotFound))
	g.Any("/*", func(ec echo.Context) error {
		c.renderError(ec, nil, errPageNotFound)
		return nil
	})
}

var errPageNotFound = switchboard.E(switchboard.ErrNotFound, "route_not_found", "there is no console page at this address")

// headers sets the security headers of every console response.
func (c *Console) headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		h := ec.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !strings.HasPrefix(ec.Request().URL.Path, StaticPrefix) {
			h.Set("Cache-Control", "no-store")
		}
		return next(ec)
	}
}

// handler is a console page handler: it runs for a signed-in viewer.
type handler func(ec echo.Context, v *Viewer) error

// page runs h for the request's viewer, or shows Sign in (401) when there
// is none; an error h returns is rendered as the error page.
func (c *Console) page(h handler) echo.HandlerFunc {
	return func(ec echo.Context) error {
		v, err := c.viewer(ec)
		if err != nil && !unauthorized(err) {
			c.renderError(ec, nil, err)
			return nil
		}
		if v == nil {
			c.render(ec, http.StatusUnauthorized, "signin", nil, c.signInData(ec, ec.Request().URL.RequestURI(), err))
			return nil
		}
		if v.Operator() && !operatorMayOpen(ec.Request().URL.Path) {
			c.renderError(ec, v, errOperatorTenantPage)
			return nil
		}
		if err := h(ec, v); err != nil {
			c.renderError(ec, v, err)
		}
		return nil
	}
}

// viewer runs the access check.
func (c *Console) viewer(ec echo.Context) (*Viewer, error) {
	if c.cfg.Access == nil {
		return nil, nil
	}
	v, ok, err := c.cfg.Access(ec)
	if err != nil || !ok {
		return nil, err
	}
	return &v, nil
}

// view is what the layout renders: the page's title and data, and who is
// looking.
type view struct {
	Title  string
	Viewer *Viewer
	// Nav is the navigation entry of the page ("catalog").
	Nav  string
	Data any
	// Switch lists the tenants the viewer may switch to from the header's
	// tenant menu (tenants.go); empty, the header shows no menu.
	Switch []members.Membership
}

// render writes the page with the given status. A template error is
// logged and answered with a bare 500: the page was not written yet,
// since it renders into a buffer first.
func (c *Console) render(ec echo.Context, status int, page string, v *Viewer, data any) {
	t, ok := c.pages[page]
	if !ok {
		c.logger.Error("console page has no template", "page", page)
		ec.Response().WriteHeader(http.StatusInternalServerError)
		return
	}
	vw := view{Viewer: v, Data: data, Nav: page, Switch: c.headerTenants(ec, v)}
	if tp, ok := data.(interface{ title() string }); ok {
		vw.Title = tp.title()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", vw); err != nil {
		c.logger.Error("rendering a console page", "page", page, "err", err)
		ec.Response().WriteHeader(http.StatusInternalServerError)
		return
	}
	ec.Response().Header().Set(echo.HeaderContentType, "text/html; charset=utf-8")
	ec.Response().WriteHeader(status)
	_, _ = ec.Response().Write(buf.Bytes())
}

// errorData is the error page's content: the typed error's code and
// message, and what to do about it.
type errorData struct {
	Status  int
	Code    string
	Message string
	Hint    string
}

func (d errorData) title() string { return http.StatusText(d.Status) }

// renderError renders err through the error table: its HTTP status, its
// code and client-safe message, and a hint by kind. Internal errors are
// logged with their cause and shown with the table's generic message.
func (c *Console) renderError(ec echo.Context, v *Viewer, err error) {
	d := problemData(err)
	if switchboard.ProblemOf(err).Internal {
		c.logger.Error("console page failed", "path", ec.Request().URL.Path, "err", err)
	}
	c.render(ec, d.Status, "error", v, *d)
}

// hintOf says what a person can do about an error of err's kind.
func hintOf(err error) string {
	switch {
	case errors.Is(err, switchboard.ErrNotFound):
		return "Check the address, or start again from the catalog."
	case errors.Is(err, switchboard.ErrInvalid):
		return "Correct the value named above and try again."
	case errors.Is(err, switchboard.ErrUnauthorized):
		return "Sign in again with a new sign-in link."
	case errors.Is(err, switchboard.ErrForbidden):
		return "Your role does not allow this; ask an owner of the tenant."
	case errors.Is(err, switchboard.ErrConflict):
		return "Someone changed this meanwhile: reload the page and try again."
	case errors.Is(err, switchboard.ErrUnavailable):
		return "The server cannot do this right now; try again in a moment."
	}
	return "Try again; if it keeps failing, tell your operator the time it happened."
}
