package console

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenants"
)

// Tester runs an instance's connection test, the probe of POST
// /v1/tenants/{t}/instances/{i}/test; *gateway.Gateway is one.
type Tester interface {
	Test(ctx context.Context, tenantSlug, instanceSlug, user string) (*gateway.TestResult, error)
}

var errNoTester = switchboard.E(switchboard.ErrUnavailable, "test_unavailable", "instance tests are not enabled on this server")

// recentCalls is how many audit rows the instance page shows.
const recentCalls = 20

// notices are what the instance page says after an action redirected
// back to it (?done=), by action; anything else says nothing.
var notices = map[string]string{
	"saved":        "Saved. The configuration passed verification before it was saved; the result is below.",
	"agents":       "The agent allowlist is saved.",
	"tools-mode":   "The MCP tools mode is saved.",
	"disconnected": "Your account is disconnected: agents can no longer act for you on this instance.",
}

// instanceData is an instance's page.
type instanceData struct {
	*tenants.InstanceView
	ConnectorName string
	MCPURL        string
	Admin         bool
	CSRF          string
	// Notice is a fixed sentence about the action just done.
	Notice string
	// Problem is the typed error of the action just refused; nothing
	// changed.
	Problem *errorData
	// AgentInput is the agent id the Add field shows again after an
	// error.
	AgentInput string
	// VerificationJSON is the last verification, indented (admins).
	VerificationJSON string
	// Test is the result of Test connection, when it just ran.
	Test *testView
	// PerUser is set for the per-user OAuth modes: each member connects
	// their own account.
	PerUser bool
	// UserSettings is set when the connector has user-scope fields: each
	// member sets their own values on their settings page.
	UserSettings bool
	// Own is the viewer's own grant (per-user modes); OwnProblem the
	// typed error of reading it.
	Own        *grantView
	OwnProblem *errorData
	// Others is every member's grant (admins, per-user modes).
	Others []memberGrant
	// Calls are the instance's most recent audit rows (the viewer's own
	// for members); CallsProblem the typed error of reading them.
	Calls        []callRow
	CallsProblem *errorData
	HasAudit     bool
}

func (d instanceData) title() string { return d.Slug }

// AuditURL is the audit page filtered to the instance.
func (d instanceData) AuditURL() string {
	return Prefix + "audit?" + url.Values{"instance": {d.Slug}, "kind": {audit.KindCalls}}.Encode()
}

// callRow is one recent call: its audit row and whom it was made for.
type callRow struct {
	audit.Entry
	// Who is the email of the member the call was made for (its
	// subject, else its actor), or that user id when it is no member's.
	Who string
}

// testView is the result of Test connection.
type testView struct {
	OK      bool
	Message string
	JSON    string
}

// indentJSON renders v as indented JSON for a <pre>; the values shown
// this way (verification and test results) are secret-free by
// construction.
func indentJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "{}"
	}
	return string(b)
}

// perUser reports whether mode has each user connect their own account.
func perUser(mode string) bool {
	return mode == registry.ModeOAuth || mode == registry.ModeOAuthCentral
}

// instanceView loads the :instance path parameter's instance and fills
// its page as v may see it: members get its endpoint, state, their own
// grant and their own calls, never its configuration.
func (c *Console) instanceView(ec echo.Context, v *Viewer) (*instanceData, *tenants.Tenant, error) {
	ctx := ec.Request().Context()
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return nil, nil, err
	}
	in, err := c.cfg.Tenants.Instance(ctx, t.Slug, ec.Param("instance"))
	if err != nil {
		return nil, nil, err
	}
	d := &instanceData{InstanceView: in, ConnectorName: in.ConnectorID, Admin: v.Admin(), CSRF: v.CSRF,
		PerUser: perUser(in.AuthMode), HasAudit: c.cfg.Audit != nil,
		MCPURL: strings.TrimRight(c.cfg.PublicURL, "/") + "/workspaces/" + t.Slug + "/webhooks/" + in.Slug + ".mcp"}
	if x, ok := c.cfg.Catalog.Connector(in.ConnectorID); ok {
		d.ConnectorName = x.Manifest.Name
		d.UserSettings = len(x.Manifest.UserFields()) > 0
	}
	if d.Admin {
		d.VerificationJSON = indentJSON(in.Verification)
	} else {
		d.InstanceView = &tenants.InstanceView{Instance: &tenants.Instance{Slug: in.Slug, ConnectorID: in.ConnectorID, AuthMode: in.AuthMode, AuthState: in.AuthState}}
	}
	// Whom user ids name: every member for admins, themself for members.
	emails := map[string]string{v.Session.UserID: v.Email}
	var people []members.Member
	if d.Admin && c.cfg.Members != nil {
		if people, err = c.cfg.Members.Members(ctx, t.ID); err != nil {
			return nil, nil, err
		}
		for _, m := range people {
			emails[m.UserID] = m.Email
		}
	}
	if d.PerUser {
		c.fillGrants(ctx, t, v, d, people)
	}
	if c.cfg.Audit != nil {
		q := audit.Query{Instance: in.Slug, Limit: recentCalls, Kind: audit.KindCalls}
		if !d.Admin {
			q.User = v.Session.UserID
		}
		rows, err := c.cfg.Audit.List(ctx, t.ID, q)
		if err != nil {
			d.CallsProblem = c.problem(ec, err)
		}
		for _, e := range rows {
			who := cmp.Or(e.Subject, e.Actor)
			d.Calls = append(d.Calls, callRow{Entry: e, Who: cmp.Or(emails[who], who)})
		}
	}
	return d, t, nil
}

// problem renders err through the error table for a part of a page,
// logging an internal error's cause.
func (c *Console) problem(ec echo.Context, err error) *errorData {
	if switchboard.ProblemOf(err).Internal {
		c.logger.Error("console page part failed", "path", ec.Request().URL.Path, "err", err)
	}
	return problemData(err)
}

// instancePage renders an instance: its MCP endpoint and state; for
// admins its agent allowlist, fields (secret ones as set or not set),
// last verification, Test connection and Delete; for per-user OAuth modes
// the viewer's own grant and, for admins, everyone's; its recent calls.
func (c *Console) instancePage(ec echo.Context, v *Viewer) error {
	d, _, err := c.instanceView(ec, v)
	if err != nil {
		return err
	}
	d.Notice = notices[ec.QueryParam("done")]
	c.render(ec, http.StatusOK, "instance", v, d)
	return nil
}

// instanceAction runs the start of every action of the instance page:
// the form's CSRF token first, then the role (admin for the admin
// actions), then the instance.
func (c *Console) instanceAction(ec echo.Context, v *Viewer, admin bool) (*instanceData, *tenants.Tenant, error) {
	if err := checkForm(ec, v); err != nil {
		return nil, nil, err
	}
	if admin && !v.Admin() {
		return nil, nil, errAdminOnly
	}
	return c.instanceView(ec, v)
}

// refuse renders the instance page with the typed error of an action
// that changed nothing.
func (c *Console) refuse(ec echo.Context, v *Viewer, d *instanceData, err error) error {
	d.Problem = c.problem(ec, err)
	c.render(ec, d.Problem.Status, "instance", v, d)
	return nil
}

// editAgents adds the agent of the form field add, or removes the one
// of remove, through the tenant service's Patch (the install's rules and
// verification, against the revision just read): a bad agent id or a
// concurrent change is shown on the page and changes nothing.
func (c *Console) editAgents(ec echo.Context, v *Viewer) error {
	d, t, err := c.instanceAction(ec, v, true)
	if err != nil {
		return err
	}
	form := ec.Request().PostForm
	agents := slices.Clone(d.Agents)
	add, remove := strings.TrimSpace(form.Get("add")), form.Get("remove")
	switch {
	case add != "":
		d.AgentInput = clipText(add)
		agents = append(agents, add)
	case remove != "" && slices.Contains(agents, remove):
		agents = slices.DeleteFunc(agents, func(a string) bool { return a == remove })
	default:
		return c.refuse(ec, v, d, switchboard.E(switchboard.ErrInvalid, "invalid_agents",
			"name an agent id to add, or choose one of the allowlist's agents to remove"))
	}
	if _, err := c.cfg.Tenants.Patch(ec.Request().Context(), t.Slug, d.Slug, tenants.InstancePatch{Agents: &agents}); err != nil {
		return c.refuse(ec, v, d, err)
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"instances/"+d.Slug+"?done=agents")
}

// setToolsMode sets what the instance endpoint's tools/list declares
// (the form field tools_mode: auto, tools or meta) through the tenant
// service's Patch: a bad value is shown on the page and changes nothing.
func (c *Console) setToolsMode(ec echo.Context, v *Viewer) error {
	d, t, err := c.instanceAction(ec, v, true)
	if err != nil {
		return err
	}
	mode := ec.Request().PostForm.Get("tools_mode")
	if _, err := c.cfg.Tenants.Patch(ec.Request().Context(), t.Slug, d.Slug, tenants.InstancePatch{ToolsMode: &mode}); err != nil {
		return c.refuse(ec, v, d, err)
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"instances/"+d.Slug+"?done=tools-mode")
}

// testConnection runs the instance's probe, as POST
// /v1/tenants/{t}/instances/{i}/test does (for per-user modes with the
// admin's own grant), and shows its result on the page.
func (c *Console) testConnection(ec echo.Context, v *Viewer) error {
	d, t, err := c.instanceAction(ec, v, true)
	if err != nil {
		return err
	}
	if c.cfg.Tester == nil {
		return c.refuse(ec, v, d, errNoTester)
	}
	user := ""
	if d.PerUser {
		user = v.Session.UserID
	}
	res, err := c.cfg.Tester.Test(ec.Request().Context(), t.Slug, d.Slug, user)
	if err != nil {
		return c.refuse(ec, v, d, err)
	}
	d.Test = &testView{OK: res.OK, Message: res.Message, JSON: indentJSON(res)}
	c.render(ec, http.StatusOK, "instance", v, d)
	return nil
}

// deleteData is the confirmation page of deleting an instance.
type deleteData struct {
	Slug          string
	ConnectorName string
	CSRF          string
}

func (d deleteData) title() string { return "Delete " + d.Slug }

// confirmDelete asks an admin to confirm deleting the instance.
func (c *Console) confirmDelete(ec echo.Context, v *Viewer) error {
	if !v.Admin() {
		return errAdminOnly
	}
	d, _, err := c.instanceView(ec, v)
	if err != nil {
		return err
	}
	c.render(ec, http.StatusOK, "instance-delete", v, deleteData{Slug: d.Slug, ConnectorName: d.ConnectorName, CSRF: v.CSRF})
	return nil
}

// deleteInstance deletes the instance and its stored fields, then goes
// back to the instance list.
func (c *Console) deleteInstance(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	if !v.Admin() {
		return errAdminOnly
	}
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return err
	}
	slug := ec.Param("instance")
	if err := c.cfg.Tenants.DeleteInstance(ec.Request().Context(), t.Slug, slug); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"instances?"+url.Values{"deleted": {slug}}.Encode())
}
