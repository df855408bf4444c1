package console

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
)

// The platform operator's pages: the tenants, the central OAuth
// providers (the maintainer view) and the operator tokens. They open for
// an operator session only (an operator sign-in link, minted with
// `switchboard admin login-link --operator` or POST
// /v1/operator-sign-in-links); anyone else signed in gets Access
// restricted (403) and never a form or a provider's data. An operator
// session opens these pages and the catalog, not a tenant's pages: it has
// no tenant (page refuses the rest).

// OperatorPrefix is where the operator's pages live.
const OperatorPrefix = Prefix + "operator/"

// OperatorHome is the operator's start page, where an operator sign-in
// link leads.
const OperatorHome = OperatorPrefix + "tenants"

// Operator reports whether the viewer is the platform operator.
func (v *Viewer) Operator() bool { return v != nil && v.Session.Operator }

var errOperatorTenantPage = switchboard.E(switchboard.ErrForbidden, "role_required",
	"the operator's console session opens the operator pages and the catalog; a tenant's pages need a member's sign-in link")

// operatorMayOpen reports whether an operator session may open path: the
// operator's pages, the catalog and the start page (which leads to the
// operator's). The rest are a tenant's pages, which need a tenant.
func operatorMayOpen(path string) bool {
	return path == Prefix || strings.HasPrefix(path, OperatorPrefix) ||
		path == Prefix+"catalog" || strings.HasPrefix(path, Prefix+"catalog/")
}

// restrictedData is the Access restricted page.
type restrictedData struct{}

func (restrictedData) title() string { return "Access restricted" }

// operatorPage runs h for the operator; anyone else signed in gets Access
// restricted (403) before h runs, so nothing is read or changed for them.
func (c *Console) operatorPage(h handler) echo.HandlerFunc {
	return c.page(func(ec echo.Context, v *Viewer) error {
		if !v.Operator() {
			c.render(ec, http.StatusForbidden, "operator-restricted", v, restrictedData{})
			return nil
		}
		return h(ec, v)
	})
}

// operatorNotFound answers an operator URL that names no page.
func (c *Console) operatorNotFound(echo.Context, *Viewer) error { return errPageNotFound }

// shownOnce is a credential shown once, right after it was created: a
// link or a token, with a copy button.
type shownOnce struct {
	Label, Value, Note string
	// Open, when set, labels a link to OpenURL: the link Value opened in
	// this browser.
	Open, OpenURL string
}

// tenantRow is one tenant of the overview.
type tenantRow struct {
	*tenants.Tenant
	Instances, Members int
}

// operatorTenantsData is the tenants overview.
type operatorTenantsData struct {
	Tenants []tenantRow
	Pager   pager
	// Slug and Name are the create form's values (kept after an error).
	Slug, Name string
	// Invite is the slug preselected in the invite form and Email its
	// value.
	Invite, Email string
	// Problem is the typed error of the form just sent.
	Problem *errorData
	// Created is the invitation link just minted, shown once.
	Created *shownOnce
}

func (operatorTenantsData) title() string { return "Tenants" }

// operatorTenants renders the tenants overview.
func (c *Console) operatorTenants(ec echo.Context, v *Viewer) error {
	return c.renderTenants(ec, v, http.StatusOK, operatorTenantsData{Invite: ec.QueryParam("created")})
}

func (c *Console) renderTenants(ec echo.Context, v *Viewer, status int, d operatorTenantsData) error {
	ctx := ec.Request().Context()
	list, next, err := c.cfg.Tenants.TenantsPage(ctx, pageOf(ec, "cursor"))
	if err != nil {
		return err
	}
	d.Pager = pagerOf(ec, "/console/operator/tenants", "cursor", next)
	instances, err := c.cfg.Tenants.Store().InstanceCounts(ctx)
	if err != nil {
		return err
	}
	people := map[switchboard.TenantID]int{}
	if c.cfg.Members != nil {
		if people, err = c.cfg.Members.MemberCounts(ctx); err != nil {
			return err
		}
	}
	for _, t := range list {
		d.Tenants = append(d.Tenants, tenantRow{Tenant: t, Instances: instances[t.ID], Members: people[t.ID]})
	}
	c.render(ec, status, "operator-tenants", v, d)
	return nil
}

// createTenant creates a tenant from the form and goes back to the
// overview with it preselected for its first owner's invitation.
func (c *Console) createTenant(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	f := ec.Request().PostForm
	slug, name := strings.TrimSpace(f.Get("slug")), strings.TrimSpace(f.Get("name"))
	t, err := c.cfg.Admin.CreateTenant(ec.Request().Context(), operatorActor(v), slug, name)
	if err != nil {
		return refused(err, func(p *errorData) error {
			return c.renderTenants(ec, v, p.Status, operatorTenantsData{Slug: slug, Name: name, Problem: p})
		})
	}
	return ec.Redirect(http.StatusSeeOther, OperatorHome+"?"+url.Values{"created": {t.Slug}}.Encode())
}

// inviteOwner mints an invitation of an owner to the tenant the form
// names and shows its link once.
func (c *Console) inviteOwner(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	if c.cfg.Admin == nil {
		return errNoOperatorStore
	}
	f := ec.Request().PostForm
	slug, email := f.Get("tenant"), strings.TrimSpace(f.Get("email"))
	ctx := ec.Request().Context()
	t, err := c.cfg.Tenants.Tenant(ctx, slug)
	var token secrets.Secret
	if err == nil {
		// The /v1 route's call; the operator may make someone an owner.
		_, token, err = c.cfg.Admin.Invite(ctx, operatorActor(v), members.RoleOwner, t.ID, email, members.RoleOwner, 0)
	}
	if err != nil {
		return refused(err, func(p *errorData) error {
			return c.renderTenants(ec, v, p.Status, operatorTenantsData{Invite: slug, Email: email, Problem: p})
		})
	}
	link := signin.LinkURL(c.cfg.PublicURL, token.Reveal())
	return c.renderTenants(ec, v, http.StatusOK, operatorTenantsData{Invite: slug, Created: &shownOnce{
		Label: "Invitation link for " + email + " (owner of " + t.Slug + ")",
		Value: link,
		Note: "Send it to them: it works once, within 24 hours, and is not shown again. If you are this owner, open it " +
			"here instead: signing in with it ends this operator session (a new one takes switchboard admin login-link --operator).",
		Open: "Open it in this browser as " + email, OpenURL: link + "&" + url.Values{signin.NextParam: {"/console/"}}.Encode(),
	}})
}

// operatorActor names the operator's session in audit rows and
// created_by, as the admin API does.
func operatorActor(v *Viewer) string { return "operator:" + v.Session.ID }

var errNoOperatorStore = switchboard.E(switchboard.ErrUnavailable, "members_unavailable", "members are not enabled on this server")

// providerForm is the register / replace form's values. The client
// secret and id are never among them: they show as set or not set.
type providerForm struct {
	Slug, Name, AuthorizeURL, TokenURL, RevokeURL, Scopes, AuthParams, AuthStyle string
	// Revision is the revision the form replaces (0: a new provider).
	Revision                     int64
	Edit                         bool
	ClientIDSet, ClientSecretSet bool
}

// operatorProvidersData is the maintainer view.
type operatorProvidersData struct {
	Providers   []*auth.ProviderView
	CallbackURL string
	Pager       pager
	Form        providerForm
	// Delete is the provider whose deletion awaits confirmation.
	Delete  *auth.ProviderView
	Problem *errorData
}

func (operatorProvidersData) title() string { return "OAuth providers" }

var errNoProviders = switchboard.E(switchboard.ErrUnavailable, "providers_unavailable", "the provider registry is not enabled on this server")

// operatorProviders renders the central OAuth providers: the list, the
// register form (or, with ?edit=slug, the replace form of one) and, with
// ?delete=slug, the confirmation of a deletion.
func (c *Console) operatorProviders(ec echo.Context, v *Viewer) error {
	if c.cfg.Providers == nil {
		return errNoProviders
	}
	d := operatorProvidersData{Form: providerForm{AuthStyle: "header"}}
	ctx := ec.Request().Context()
	if slug := ec.QueryParam("edit"); slug != "" {
		p, err := c.cfg.Providers.View(ctx, slug)
		if err != nil {
			return err
		}
		d.Form = formOf(p)
	}
	if slug := ec.QueryParam("delete"); slug != "" {
		p, err := c.cfg.Providers.View(ctx, slug)
		if err != nil {
			return err
		}
		d.Delete = p
	}
	return c.renderProviders(ec, v, http.StatusOK, d)
}

// formOf is the replace form of p.
func formOf(p *auth.ProviderView) providerForm {
	lines := []string{}
	for _, k := range slices.Sorted(maps.Keys(p.AuthParams)) {
		lines = append(lines, k+"="+p.AuthParams[k])
	}
	return providerForm{Slug: p.Slug, Name: p.Name, AuthorizeURL: p.AuthorizeURL, TokenURL: p.TokenURL, RevokeURL: p.RevokeURL,
		Scopes: strings.Join(p.Scopes, " "), AuthParams: strings.Join(lines, "\n"), AuthStyle: p.AuthStyle,
		Revision: p.Revision, Edit: true, ClientIDSet: p.ClientIDSet, ClientSecretSet: p.ClientSecretSet}
}

func (c *Console) renderProviders(ec echo.Context, v *Viewer, status int, d operatorProvidersData) error {
	list, next, err := c.cfg.Providers.Page(ec.Request().Context(), pageOf(ec, "cursor"))
	if err != nil {
		return err
	}
	d.Providers, d.CallbackURL = list, c.cfg.Providers.CallbackURL()
	d.Pager = pagerOf(ec, "/console/operator/providers", "cursor", next)
	c.render(ec, status, "operator-providers", v, d)
	return nil
}

// putProvider registers or replaces a provider from the form. A client id
// or secret left empty keeps the stored one; the revision guards against
// replacing a change made meanwhile (and a new provider against taking an
// existing slug). A refused form is shown again with its values, never
// with the secret typed into it.
func (c *Console) putProvider(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	if c.cfg.Providers == nil {
		return errNoProviders
	}
	f := ec.Request().PostForm
	form := providerForm{Slug: strings.TrimSpace(f.Get("slug")), Name: f.Get("name"), AuthorizeURL: strings.TrimSpace(f.Get("authorize_url")),
		TokenURL: strings.TrimSpace(f.Get("token_url")), RevokeURL: strings.TrimSpace(f.Get("revoke_url")), Scopes: f.Get("scopes"),
		AuthParams: f.Get("auth_params"), AuthStyle: f.Get("auth_style"), Edit: f.Get("edit") == "1"}
	rev, err := strconv.ParseInt(f.Get("revision"), 10, 64)
	if err != nil || rev < 0 {
		return switchboard.E(switchboard.ErrInvalid, "invalid_request", "the form's revision is not a number: reload the page")
	}
	form.Revision = rev
	req := auth.ProviderRequest{Name: form.Name, AuthorizeURL: form.AuthorizeURL, TokenURL: form.TokenURL, RevokeURL: form.RevokeURL,
		Scopes: strings.Fields(form.Scopes), AuthStyle: form.AuthStyle, Revision: &rev}
	params, perr := parseParams(form.AuthParams)
	req.AuthParams = params
	if id := strings.TrimSpace(f.Get("client_id")); id != "" {
		s := secrets.New(id)
		req.ClientID = &s
	}
	if sec := f.Get("client_secret"); sec != "" {
		s := secrets.New(sec)
		req.ClientSecret = &s
	}
	err = perr
	if err == nil {
		_, _, err = c.cfg.Admin.PutProvider(ec.Request().Context(), operatorActor(v), form.Slug, req)
	}
	if err != nil {
		return refused(err, func(p *errorData) error {
			if cur, verr := c.cfg.Providers.View(ec.Request().Context(), form.Slug); verr == nil && form.Edit {
				form.ClientIDSet, form.ClientSecretSet = cur.ClientIDSet, cur.ClientSecretSet
			}
			return c.renderProviders(ec, v, p.Status, operatorProvidersData{Form: form, Problem: p})
		})
	}
	return ec.Redirect(http.StatusSeeOther, OperatorPrefix+"providers")
}

// parseParams reads "name=value" lines.
func parseParams(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, switchboard.E(switchboard.ErrInvalid, "invalid_provider", "extra authorize parameters are one name=value per line")
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return out, nil
}

// deleteProvider deletes the provider of the path, confirmed on the
// providers page.
func (c *Console) deleteProvider(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	if c.cfg.Providers == nil {
		return errNoProviders
	}
	if err := c.cfg.Admin.DeleteProvider(ec.Request().Context(), operatorActor(v), ec.Param("provider")); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, OperatorPrefix+"providers")
}

// operatorTokensData is the operator tokens page.
type operatorTokensData struct {
	Tokens  []auth.OperatorToken
	Pager   pager
	Name    string
	Problem *errorData
	Created *shownOnce
}

func (operatorTokensData) title() string { return "Operator tokens" }

var errNoOperators = switchboard.E(switchboard.ErrUnavailable, "operators_unavailable", "operator tokens are not enabled on this server")

// operatorTokens lists the operator tokens.
func (c *Console) operatorTokens(ec echo.Context, v *Viewer) error {
	return c.renderTokens(ec, v, http.StatusOK, operatorTokensData{})
}

func (c *Console) renderTokens(ec echo.Context, v *Viewer, status int, d operatorTokensData) error {
	if c.cfg.Operators == nil {
		return errNoOperators
	}
	list, next, err := c.cfg.Operators.Page(ec.Request().Context(), pageOf(ec, "cursor"))
	if err != nil {
		return err
	}
	d.Tokens, d.Pager = list, pagerOf(ec, "/console/operator/tokens", "cursor", next)
	c.render(ec, status, "operator-tokens", v, d)
	return nil
}

// createOperatorToken creates a named operator token and shows it once.
func (c *Console) createOperatorToken(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	if c.cfg.Operators == nil {
		return errNoOperators
	}
	name := ec.Request().PostForm.Get("name")
	token, rec, err := c.cfg.Admin.CreateOperatorToken(ec.Request().Context(), operatorActor(v), name)
	if err != nil {
		return refused(err, func(p *errorData) error {
			return c.renderTokens(ec, v, p.Status, operatorTokensData{Name: name, Problem: p})
		})
	}
	return c.renderTokens(ec, v, http.StatusOK, operatorTokensData{Created: &shownOnce{
		Label: "Operator token " + rec.Name,
		Value: token.Reveal(),
		Note:  "Copy it now into your secret store: it is not shown again. Use it as Authorization: Bearer with the admin API.",
	}})
}

// revokeOperatorToken revokes the token of the path.
func (c *Console) revokeOperatorToken(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	if c.cfg.Operators == nil {
		return errNoOperators
	}
	_, err := c.cfg.Admin.RevokeOperatorToken(ec.Request().Context(), operatorActor(v), ec.Param("token"))
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, OperatorPrefix+"tokens")
}
