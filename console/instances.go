package console

import (
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
	// The tenant service finds tenants by slug; sessions name them by id.
	list, err := c.cfg.Tenants.ListTenants(ec.Request().Context())
	if err != nil {
		return nil, err
	}
	for _, t := range list {
		if t.ID == v.Session.Tenant {
			return t, nil
		}
	}
	return nil, switchboard.E(switchboard.ErrNotFound, "tenant_not_found", "your tenant no longer exists")
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
	list, err := c.cfg.Tenants.ListInstances(ec.Request().Context(), t.Slug)
	if err != nil {
		return err
	}
	c.render(ec, http.StatusOK, "instances", v, instancesData{Tenant: t.Name, Instances: list, Admin: v.Admin()})
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
	Modes    []string
	Mode     string
	Fields   []formField
	Agents   string
	CSRF     string
	Problem  *errorData
	// Verification is the result of the last save's verification.
	Verification *tenants.Verification
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
	d := newInstallData(x, v)
	if slug := ec.QueryParam("instance"); slug != "" {
		t, err := c.tenantOf(ec, v)
		if err != nil {
			return err
		}
		in, err := c.cfg.Tenants.Instance(ec.Request().Context(), t.Slug, slug)
		if err != nil {
			return err
		}
		d.fill(in)
	}
	c.render(ec, http.StatusOK, "install", v, d)
	return nil
}

func newInstallData(x *registry.Connector, v *Viewer) installData {
	m := &x.Manifest
	d := installData{
		Connector: connectorCard{ID: m.ID, Name: m.Name, Type: m.Type, HasIcon: m.Icons.Small != ""},
		Slug:      m.ID, Modes: orderedModes(m), CSRF: v.CSRF,
	}
	if len(d.Modes) > 0 {
		d.Mode = d.Modes[0]
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

// fill shows an installed instance in the form: its mode, agents,
// non-secret values and the state of its secret fields.
func (d *installData) fill(in *tenants.InstanceView) {
	d.Slug, d.Existing, d.Mode = in.Slug, true, in.AuthMode
	d.Agents = strings.Join(in.Agents, "\n")
	d.Verification = &in.Verification
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
	d := newInstallData(x, v)
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
		c.render(ec, d.Problem.Status, "install", v, d)
		return nil
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"instances/"+in.Slug)
}

// instanceData is an instance's page.
type instanceData struct {
	*tenants.InstanceView
	ConnectorName string
	MCPURL        string
	Admin         bool
}

func (d instanceData) title() string { return d.Slug }

// instancePage renders an instance: its MCP endpoint, auth mode, agent
// allowlist, fields (secret ones as set or not set) and last
// verification. Members see the endpoint and state, not the
// configuration.
func (c *Console) instancePage(ec echo.Context, v *Viewer) error {
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return err
	}
	in, err := c.cfg.Tenants.Instance(ec.Request().Context(), t.Slug, ec.Param("instance"))
	if err != nil {
		return err
	}
	d := instanceData{InstanceView: in, ConnectorName: in.ConnectorID, Admin: v.Admin(),
		MCPURL: strings.TrimRight(c.cfg.PublicURL, "/") + "/workspaces/" + t.Slug + "/webhooks/" + in.Slug + ".mcp"}
	if x, ok := c.cfg.Catalog.Connector(in.ConnectorID); ok {
		d.ConnectorName = x.Manifest.Name
	}
	if !d.Admin {
		d.InstanceView = &tenants.InstanceView{Instance: &tenants.Instance{Slug: in.Slug, ConnectorID: in.ConnectorID, AuthMode: in.AuthMode, AuthState: in.AuthState}}
	}
	c.render(ec, http.StatusOK, "instance", v, d)
	return nil
}
