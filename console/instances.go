package console

import (
	"context"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
)

// CSRFField is the form field that carries the session's anti-forgery
// token in every form that changes something.
const CSRFField = signin.CSRFField

// maxForm bounds a console form's body.
const maxForm = 64 << 10

var (
	errCSRF = switchboard.E(switchboard.ErrForbidden, "csrf_failed",
		"the form's anti-forgery token is missing or not this session's: reload the page and submit it again")
	errAdminOnly = switchboard.E(switchboard.ErrForbidden, "role_required",
		"installing and configuring instances needs the admin or owner role")
)

// tenantOf returns the viewer's tenant.
func (c *Console) tenantOf(ec echo.Context, v *Viewer) (*tenants.Tenant, error) {
	// Sessions name tenants by id.
	t, err := c.cfg.Tenants.Store().TenantByID(ec.Request().Context(), v.Session.Tenant)
	if switchboard.CodeOf(err) == "tenant_not_found" {
		return nil, switchboard.E(switchboard.ErrNotFound, "tenant_not_found", "your tenant no longer exists")
	}
	return t, err
}

// Admin reports whether the viewer may install and configure instances.
func (v *Viewer) Admin() bool {
	return switchboard.Role(v.Session.Role).AtLeast(switchboard.RoleAdmin)
}

// checkForm parses a POST form and refuses it unless it carries the
// session's CSRF token and comes from this site.
func checkForm(ec echo.Context, v *Viewer) error {
	r := ec.Request()
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errCSRF
	}
	r.Body = http.MaxBytesReader(ec.Response(), r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		return switchboard.E(switchboard.ErrInvalid, "invalid_request", "the form could not be read (at most 64 KiB)").WithCause(err)
	}
	got := r.PostForm.Get(CSRFField)
	if v.CSRF == "" || subtle.ConstantTimeCompare([]byte(got), []byte(v.CSRF)) != 1 {
		return errCSRF
	}
	return nil
}

// instancesData is the instance list of the viewer's tenant.
type instancesData struct {
	Tenant    string
	Instances []*tenants.InstanceView
	Admin     bool
	Pager     pager
	// Deleted names the instance just deleted.
	Deleted string
}

func (instancesData) title() string { return "Instances" }

// instanceList renders the tenant's instances: what each connects and
// whether it is ready. Members see the same list; only admins get the
// links to configure.
func (c *Console) instanceList(ec echo.Context, v *Viewer) error {
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return err
	}
	list, next, err := c.cfg.Tenants.InstancesPage(ec.Request().Context(), t.Slug, pageOf(ec, "cursor"))
	if err != nil {
		return err
	}
	d := instancesData{Tenant: t.Name, Instances: list, Admin: v.Admin(), Pager: pagerOf(ec, "/console/instances", "cursor", next)}
	if slug := ec.QueryParam("deleted"); switchboard.ValidSlug(slug) {
		d.Deleted = slug
	}
	c.render(ec, http.StatusOK, "instances", v, d)
	return nil
}

// formField is one field of the install form, generated from the
// connector's env[] entry.
type formField struct {
	registry.Field
	// Value is the value shown in the input: the submitted or stored
	// value of a non-secret field, its default otherwise. Never a secret.
	Value string
	// State is the stored state of a secret field: set, unset or
	// undecryptable; empty on a new instance.
	State string
}

// installData is the install / configure form of a connector.
type installData struct {
	Connector connectorCard
	Slug      string
	// Existing is set when Slug names an instance already installed.
	Existing bool
	Modes    []modeChoice
	Mode     string
	Fields   []formField
	Agents   string
	CSRF     string
	Problem  *errorData
	// ProblemJSON is the refused save's typed error as the admin API
	// would answer it, indented.
	ProblemJSON string
	// CallbackURL is the exact redirect URI to register with the
	// provider in mode oauth (the tenant's own client); empty when the
	// connector has no such mode.
	CallbackURL string
}

// modeChoice is one auth mode of the form's picker.
type modeChoice struct {
	ID string
	// Note says what the mode needs, such as a provider the operator has
	// not registered yet.
	Note string
}

func (d installData) title() string { return "Install " + d.Connector.Name }

// orderedModes lists the connector's modes with oauthCentral first: the
// platform's own OAuth client is the default when offered.
func orderedModes(m *registry.Manifest) []string {
	modes := slices.Clone(m.Auth.Modes)
	slices.SortStableFunc(modes, func(a, b string) int {
		switch {
		case a == registry.ModeOAuthCentral && b != a:
			return -1
		case b == registry.ModeOAuthCentral && a != b:
			return 1
		}
		return 0
	})
	return modes
}

// providerReady reports whether the operator registered the connector's
// central OAuth provider with a client, so that oauthCentral works.
func (c *Console) providerReady(ctx context.Context, m *registry.Manifest) bool {
	if m.Auth.Provider == "" || c.cfg.Providers == nil {
		return false
	}
	p, err := c.cfg.Providers.View(ctx, m.Auth.Provider)
	return err == nil && p.ClientIDSet
}

// installForm renders the install form of the :connector path parameter,
// or, with ?instance=slug, the configuration of an existing instance
// (non-secret values filled in, secret fields shown as set or not set).
func (c *Console) installForm(ec echo.Context, v *Viewer) error {
	if !v.Admin() {
		return errAdminOnly
	}
	x, err := c.connector(ec)
	if err != nil {
		return err
	}
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return err
	}
	d := c.newInstallData(ec.Request().Context(), x, v)
	if slug := ec.QueryParam("instance"); slug != "" {
		in, err := c.cfg.Tenants.Instance(ec.Request().Context(), t.Slug, slug)
		if err != nil {
			return err
		}
		d.fill(in)
	}
	c.render(ec, http.StatusOK, "install", v, c.withCallback(d, t))
	return nil
}

// newInstallData is the empty form of connector x: oauthCentral first,
// and preselected when its provider is registered (else the first other
// mode is).
func (c *Console) newInstallData(ctx context.Context, x *registry.Connector, v *Viewer) installData {
	m := &x.Manifest
	d := installData{
		Connector: connectorCard{ID: m.ID, Name: m.Name, Type: m.Type, HasIcon: m.Icons.Small != ""},
		Slug:      m.ID, CSRF: v.CSRF,
	}
	central := c.providerReady(ctx, m)
	for _, mode := range orderedModes(m) {
		ch := modeChoice{ID: mode}
		if mode == registry.ModeOAuthCentral && !central {
			ch.Note = "The operator has not registered the provider " + m.Auth.Provider + " with a client yet: choose another mode, or ask the operator to register it."
		}
		if d.Mode == "" && ch.Note == "" {
			d.Mode = mode
		}
		d.Modes = append(d.Modes, ch)
	}
	if d.Mode == "" && len(d.Modes) > 0 {
		d.Mode = d.Modes[0].ID
	}
	for _, f := range m.Env {
		ff := formField{Field: f}
		if !f.Secret {
			ff.Value = f.Default
		}
		d.Fields = append(d.Fields, ff)
	}
	return d
}

// withCallback sets the exact callback URL of mode oauth for the form's
// instance name, when the connector offers that mode.
func (c *Console) withCallback(d installData, t *tenants.Tenant) installData {
	for _, m := range d.Modes {
		if m.ID == registry.ModeOAuth && c.cfg.RedirectURI != nil && switchboard.ValidSlug(d.Slug) {
			d.CallbackURL = c.cfg.RedirectURI(registry.ModeOAuth, t.Slug, d.Slug)
		}
	}
	return d
}

// fill shows an installed instance in the form: its mode, agents,
// non-secret values and the state of its secret fields.
func (d *installData) fill(in *tenants.InstanceView) {
	d.Slug, d.Existing, d.Mode = in.Slug, true, in.AuthMode
	d.Agents = strings.Join(in.Agents, "\n")
	for i := range d.Fields {
		for _, fv := range in.Fields {
			if fv.Name != d.Fields[i].Name {
				continue
			}
			if d.Fields[i].Secret {
				d.Fields[i].State = fv.State
			} else {
				d.Fields[i].Value = fv.Value
			}
		}
	}
}

// install saves the form: verify-before-save through the tenant service,
// so a failed verification changes nothing and is shown on the form with
// its typed error. An empty secret field keeps the stored value; a
// secret typed into the form is never rendered back.
func (c *Console) install(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	if !v.Admin() {
		return errAdminOnly
	}
	x, err := c.connector(ec)
	if err != nil {
		return err
	}
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return err
	}
	form := ec.Request().PostForm
	d := c.newInstallData(ec.Request().Context(), x, v)
	d.Slug = strings.TrimSpace(form.Get("slug"))
	d.Mode = form.Get("auth_mode")
	d.Agents = form.Get("agents")
	req := tenants.InstallRequest{ConnectorID: x.Manifest.ID, AuthMode: d.Mode, Fields: map[string]*secrets.Secret{}, Agents: []string{}}
	for _, a := range strings.FieldsFunc(d.Agents, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if a = strings.TrimSpace(a); a != "" {
			req.Agents = append(req.Agents, a)
		}
	}
	for i, f := range d.Fields {
		val := form.Get("field_" + f.Name)
		if f.Secret && val == "" {
			continue // keep the stored secret
		}
		if !f.Secret {
			d.Fields[i].Value = val
		}
		s := secrets.New(val)
		req.Fields[f.Name] = &s
	}
	ctx := ec.Request().Context()
	in, _, err := c.cfg.Tenants.Install(ctx, t.Slug, d.Slug, req)
	if err != nil {
		d.Problem = problemData(err)
		d.ProblemJSON = indentJSON(switchboard.ErrorBody{Error: switchboard.ProblemOf(err).Detail})
		if cur, ierr := c.cfg.Tenants.Instance(ctx, t.Slug, d.Slug); ierr == nil {
			d.Existing = true
			for i := range d.Fields {
				for _, fv := range cur.Fields {
					if fv.Name == d.Fields[i].Name && d.Fields[i].Secret {
						d.Fields[i].State = fv.State
					}
				}
			}
		}
		c.render(ec, d.Problem.Status, "install", v, c.withCallback(d, t))
		return nil
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"instances/"+in.Slug+"?done=saved")
}
