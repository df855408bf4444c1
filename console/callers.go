package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/tenants"
)

// The Callers page (the credentials agents and jobs call instances with)
// and the API keys page (tenant API keys for automation of /v1). Both are
// for admins and owners, as the /v1 routes of the same rows are; every
// change goes through the same domain calls as those routes. A created
// token is rendered in the POST's response only (which is no-store), so
// a reload or the back button never shows it again.

var (
	errPeopleRole = switchboard.E(switchboard.ErrForbidden, "role_required",
		"managing callers, API keys and members needs the admin or owner role")
	errNoPeople = switchboard.E(switchboard.ErrUnavailable, "members_unavailable",
		"members and tenant API keys are not enabled on this server")
)

// choice is one option of a radio group or select, with its help.
type choice struct {
	Value, Label, Help string
}

// stamp formats a time for the pages: UTC to the minute, "never" for nil.
func stamp(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// refused shows a form's refused submission: again, with the typed error
// (rerender), when the request was at fault; a server-side failure gets
// the error page instead.
func refused(err error, rerender func(*errorData) error) error {
	p := problemData(err)
	if p.Status >= http.StatusInternalServerError {
		return err
	}
	return rerender(p)
}

// adminTenant admits an admin or owner to a people page and returns their
// tenant; a POST is checked for its CSRF token first.
func (c *Console) adminTenant(ec echo.Context, v *Viewer) (*tenants.Tenant, error) {
	if ec.Request().Method == http.MethodPost {
		if err := checkForm(ec, v); err != nil {
			return nil, err
		}
	}
	if !v.Admin() {
		return nil, errPeopleRole
	}
	if c.cfg.Members == nil || c.cfg.APIKeys == nil || c.cfg.Admin == nil {
		return nil, errNoPeople
	}
	return c.tenantOf(ec, v)
}

// callerKinds are the kinds of caller the create form offers.
var callerKinds = []choice{
	{tenants.KindAgentPlatform, "Agent platform", "An agent runtime (yours or a vendor's) that calls instances for many people."},
	{tenants.KindCron, "Scheduled job", "A job that runs on a schedule, usually as one service account."},
	{tenants.KindKnowledgeSync, "Knowledge sync", "A job that reads the connected apps into a knowledge base."},
}

// userModes are how a caller establishes the user a call acts for.
var userModes = []choice{
	{tenants.UserFixed, "Fixed user", "Every call acts for the user named below (a service account), or for no user when it is left empty."},
	{tenants.UserHeader, "User per request, by header", "The platform names the user in X-User-Id on every request. Only a trusted caller may."},
	{tenants.UserJWT, "User per request, by signed JWT", "Every request carries an X-User-Assertion JWT signed with the server's caller JWT keys; its sub is the user."},
}

// callerForm is what the create-caller form holds, kept across a refused
// submission.
type callerForm struct {
	Name, Kind, UserMode, AgentID, UserID, ExternalSubjects string
	Trusted                                                 bool
}

// callersData is the Callers page: the tenant's callers and the form that
// creates one.
type callersData struct {
	Callers   []*tenants.Caller
	Form      callerForm
	Kinds     []choice
	UserModes []choice
	CSRF      string
	Pager     pager
	// Problem is the typed error of a refused creation.
	Problem *errorData
}

func (callersData) title() string { return "Callers" }

// When formats a caller's time (its creation, or its revocation).
func (callersData) When(t any) string {
	switch t := t.(type) {
	case time.Time:
		return stamp(&t)
	case *time.Time:
		return stamp(t)
	}
	return ""
}

// callerList renders the tenant's callers and the create form.
func (c *Console) callerList(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	return c.renderCallers(ec, v, t, http.StatusOK, callerForm{Kind: tenants.KindAgentPlatform, UserMode: tenants.UserFixed}, nil)
}

func (c *Console) renderCallers(ec echo.Context, v *Viewer, t *tenants.Tenant, status int, f callerForm, problem *errorData) error {
	list, next, err := c.cfg.Tenants.CallersPage(ec.Request().Context(), t.Slug, pageOf(ec, "cursor"))
	if err != nil {
		return err
	}
	c.render(ec, status, "callers", v, callersData{Callers: list, Pager: pagerOf(ec, "/console/callers", "cursor", next), Form: f, Kinds: callerKinds, UserModes: userModes, CSRF: v.CSRF, Problem: problem})
	return nil
}

// createdCallerData is the one page that shows a caller's token.
type createdCallerData struct {
	Caller *tenants.Caller
	Token  string
	// Example is the MCP endpoint pattern the token is used on.
	Example string
}

func (createdCallerData) title() string { return "Caller created" }

// createCaller creates a caller from the form (the tenant service's
// CreateCaller, as POST /v1/tenants/{t}/callers) and shows its token,
// this once. A refused form is shown again with the typed error.
func (c *Console) createCaller(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	form := ec.Request().PostForm
	f := callerForm{Name: form.Get("name"), Kind: form.Get("kind"), UserMode: form.Get("user_mode"),
		AgentID: strings.TrimSpace(form.Get("agent_id")), UserID: strings.TrimSpace(form.Get("user_id")),
		ExternalSubjects: form.Get("external_subjects"), Trusted: form.Get("trusted") == "on"}
	req := tenants.CallerRequest{Name: f.Name, Kind: f.Kind, Trusted: f.Trusted, AgentID: f.AgentID, UserID: f.UserID, UserMode: f.UserMode}
	for _, s := range strings.FieldsFunc(f.ExternalSubjects, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if s = strings.TrimSpace(s); s != "" {
			req.ExternalSubjects = append(req.ExternalSubjects, s)
		}
	}
	caller, token, err := c.cfg.Tenants.CreateCaller(ec.Request().Context(), t.Slug, req)
	if err != nil {
		return refused(err, func(p *errorData) error { return c.renderCallers(ec, v, t, p.Status, f, p) })
	}
	c.render(ec, http.StatusOK, "caller-created", v, createdCallerData{Caller: caller, Token: token.Reveal(),
		Example: strings.TrimRight(c.cfg.PublicURL, "/") + "/workspaces/" + t.Slug + "/webhooks/<instance>.mcp"})
	return nil
}

// revokeCaller revokes a caller (as DELETE /v1/tenants/{t}/callers/{c}):
// the gateway refuses its token from the next call on.
func (c *Console) revokeCaller(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	if _, err := c.cfg.Tenants.RevokeCaller(ec.Request().Context(), t.Slug, switchboard.CallerID(ec.Param("caller"))); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"callers")
}

// keyExpiries are the lifetimes the API key form offers, in days; 0 is
// no expiry.
var keyExpiries = []choice{
	{"30", "30 days", ""},
	{"90", "90 days", ""},
	{"365", "One year", ""},
	{"0", "Never", ""},
}

// apiKeyForm is what the create-key form holds.
type apiKeyForm struct {
	Name, Role, UserID, Expiry string
}

// apiKeyRow is one key in the list, with its creator and user named.
type apiKeyRow struct {
	*tenants.APIKey
	Creator, ActsAs string
	// State is active, expired or revoked.
	State string
}

// LastUsed and the others format the key's times.
func (r apiKeyRow) LastUsed() string { return stamp(r.LastUsedAt) }
func (r apiKeyRow) Created() string  { return stamp(&r.CreatedAt) }
func (r apiKeyRow) Expires() string  { return stamp(r.ExpiresAt) }
func (r apiKeyRow) Revoked() string  { return stamp(r.RevokedAt) }

// apiKeysData is the API keys page.
type apiKeysData struct {
	Keys     []apiKeyRow
	Members  []members.Member
	Form     apiKeyForm
	Roles    []choice
	Expiries []choice
	CSRF     string
	Pager    pager
	Problem  *errorData
}

func (apiKeysData) title() string { return "API keys" }

// keyRoles are the roles a tenant API key may have.
var keyRoles = []choice{
	{string(switchboard.RoleMember), "Member", "Reads the tenant's instances, and its user's own grants and audit rows."},
	{string(switchboard.RoleAdmin), "Admin", "Installs and configures instances, manages callers, API keys and invitations."},
}

// apiKeyList renders the tenant's API keys and the create form.
func (c *Console) apiKeyList(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	return c.renderAPIKeys(ec, v, t, http.StatusOK, apiKeyForm{Role: string(switchboard.RoleMember), Expiry: "90"}, nil)
}

func (c *Console) renderAPIKeys(ec echo.Context, v *Viewer, t *tenants.Tenant, status int, f apiKeyForm, problem *errorData) error {
	ctx := ec.Request().Context()
	keys, next, err := c.cfg.APIKeys.Page(ctx, t.ID, pageOf(ec, "cursor"))
	if err != nil {
		return err
	}
	// Every member: the "acts as" select offers each, and creators are
	// shown by email.
	people, err := c.cfg.Members.Members(ctx, t.ID)
	if err != nil {
		return err
	}
	emails := map[string]string{members.ActorOperator: "the operator"}
	for _, m := range people {
		emails[m.UserID] = m.Email
	}
	name := func(id string) string {
		if e, ok := emails[id]; ok {
			return e
		}
		return id // another key's id, or a member since removed
	}
	now := time.Now()
	d := apiKeysData{Members: people, Pager: pagerOf(ec, "/console/api-keys", "cursor", next), Form: f, Roles: keyRoles, Expiries: keyExpiries, CSRF: v.CSRF, Problem: problem}
	for _, k := range keys {
		r := apiKeyRow{APIKey: k, Creator: name(k.CreatedBy), State: "active"}
		if k.UserID != "" {
			r.ActsAs = name(k.UserID)
		}
		switch {
		case k.RevokedAt != nil:
			r.State = "revoked"
		case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
			r.State = "expired"
		}
		d.Keys = append(d.Keys, r)
	}
	c.render(ec, status, "api-keys", v, d)
	return nil
}

// createdKeyData is the one page that shows an API key.
type createdKeyData struct {
	Key     *tenants.APIKey
	Token   string
	Expires string
	// Example is a /v1 URL the key may call.
	Example string
}

func (createdKeyData) title() string { return "API key created" }

var errKeyExpiry = switchboard.E(switchboard.ErrInvalid, "invalid_expiry", "choose one of the offered expiries")

// createAPIKey creates a tenant API key from the form (the admin API's
// CreateAPIKey, as POST /v1/tenants/{t}/api-keys, with its audit row)
// and shows the key, this once.
func (c *Console) createAPIKey(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	form := ec.Request().PostForm
	f := apiKeyForm{Name: form.Get("name"), Role: form.Get("role"), UserID: form.Get("user_id"), Expiry: form.Get("expiry")}
	req := tenants.APIKeyRequest{Name: f.Name, Role: switchboard.Role(f.Role), UserID: f.UserID}
	days, err := strconv.Atoi(f.Expiry)
	if err != nil || days < 0 || days > 365 {
		p := problemData(errKeyExpiry)
		return c.renderAPIKeys(ec, v, t, p.Status, f, p)
	}
	if days > 0 {
		exp := time.Now().Add(time.Duration(days) * 24 * time.Hour)
		req.ExpiresAt = &exp
	}
	key, token, err := c.cfg.Admin.CreateAPIKey(ec.Request().Context(), v.Session.UserID, t, req)
	if err != nil {
		return refused(err, func(p *errorData) error { return c.renderAPIKeys(ec, v, t, p.Status, f, p) })
	}
	c.render(ec, http.StatusOK, "api-key-created", v, createdKeyData{Key: key, Token: token.Reveal(), Expires: stamp(key.ExpiresAt),
		Example: strings.TrimRight(c.cfg.PublicURL, "/") + "/v1/tenants/" + t.Slug + "/instances"})
	return nil
}

// revokeAPIKey revokes a key (as DELETE /v1/tenants/{t}/api-keys/{k},
// with its audit row): refused from the next request on.
func (c *Console) revokeAPIKey(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	if _, err := c.cfg.Admin.RevokeAPIKey(ec.Request().Context(), v.Session.UserID, t, ec.Param("key")); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"api-keys")
}
