package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// TenantRequest is the body of POST /v1/tenants.
type TenantRequest struct {
	Slug string `json:"slug"`
	Name string `json:"name"`
}

func (s *Server) createTenant(c echo.Context) error {
	var req TenantRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	t, err := s.CreateTenant(c.Request().Context(), actorOf(c), req.Slug, req.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

// CreateTenant creates a tenant as POST /v1/tenants does, and records
// the change in the new tenant's audit log with actor (the console's
// operator pages call it too).
func (s *Server) CreateTenant(ctx context.Context, actor, slug, name string) (*tenants.Tenant, error) {
	t, err := s.cfg.Tenants.CreateTenant(ctx, slug, name)
	if err != nil {
		return t, err
	}
	s.recordAs(actor, t.ID, "", t.Slug, "tenant.create")
	return t, nil
}

func (s *Server) listTenants(c echo.Context) error {
	q, err := pageQuery(c)
	if err != nil {
		return err
	}
	list, next, err := s.cfg.Tenants.TenantsPage(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return listPage(c, map[string]any{"tenants": list}, next)
}

func (s *Server) getTenant(c echo.Context) error {
	t, err := s.cfg.Tenants.Tenant(c.Request().Context(), c.Param("tenant"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

// TenantPatch is the body of PATCH /v1/tenants/{tenant}: the tenant's
// settings. mcp_context_budget is bytes of tools/list, or null for the
// operator's default; an absent property keeps its value.
type TenantPatch struct {
	MCPContextBudget json.RawMessage `json:"mcp_context_budget"`
}

// patchTenant changes the tenant's settings.
func (s *Server) patchTenant(c echo.Context) error {
	var req TenantPatch
	if err := decode(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if req.MCPContextBudget == nil {
		return s.getTenant(c)
	}
	var budget *int
	if err := json.Unmarshal(req.MCPContextBudget, &budget); err != nil {
		return switchboard.E(switchboard.ErrInvalid, "invalid_context_budget",
			"mcp_context_budget must be an integer number of bytes, or null for the operator's default")
	}
	t, err := s.cfg.Tenants.SetContextBudget(ctx, c.Param("tenant"), budget)
	if err != nil {
		return err
	}
	s.recordAs(actorOf(c), t.ID, "", t.Slug, "tenant.settings")
	return c.JSON(http.StatusOK, t)
}

// installBody is the body of PUT and PATCH of an instance as it arrives:
// properties are pointers so that a missing one is told apart from an
// empty one, and field values are raw so that a value of the wrong type
// is reported by name.
type installBody struct {
	ConnectorID *string                    `json:"connector_id"`
	AuthMode    *string                    `json:"auth_mode"`
	Fields      map[string]json.RawMessage `json:"fields"`
	Agents      *[]string                  `json:"agents"`
	// ToolsMode is optional in a PUT too: absent keeps the stored mode
	// (auto for a new instance).
	ToolsMode *string `json:"tools_mode"`
}

// fields decodes the field values: a string sets, null clears.
func (b *installBody) fields() (map[string]*secrets.Secret, error) {
	if b.Fields == nil {
		return nil, nil
	}
	out := make(map[string]*secrets.Secret, len(b.Fields))
	for name, raw := range b.Fields {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			out[name] = nil
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, badJSON("field %q must be a JSON string or null", "fields."+truncate(name, 64))
		}
		sv := secrets.New(v)
		out[name] = &sv
	}
	return out, nil
}

func missingProperty(name string) error {
	return switchboard.E(switchboard.ErrInvalid, "missing_property",
		"%s is required: PUT replaces the instance's whole configuration (send \"agents\": [] for an empty allowlist); use PATCH to change only some properties", name)
}

// request is the body of a PUT: connector_id, auth_mode and agents must
// all be present, so that a forgotten one never resets the auth mode or
// empties the allowlist silently. auth_mode is "" for a connector that
// declares no auth modes (auth type none), and only for one.
func (b *installBody) request(cat *registry.Catalog) (tenants.InstallRequest, error) {
	switch {
	case b.ConnectorID == nil || *b.ConnectorID == "":
		return tenants.InstallRequest{}, missingProperty("connector_id")
	case b.AuthMode == nil || (*b.AuthMode == "" && !withoutAuthModes(cat, *b.ConnectorID)):
		return tenants.InstallRequest{}, missingProperty("auth_mode")
	case b.Agents == nil:
		return tenants.InstallRequest{}, missingProperty("agents")
	}
	fields, err := b.fields()
	if err != nil {
		return tenants.InstallRequest{}, err
	}
	req := tenants.InstallRequest{ConnectorID: *b.ConnectorID, AuthMode: *b.AuthMode, Agents: *b.Agents, Fields: fields}
	if b.ToolsMode != nil {
		if err := tenants.CheckToolsMode(*b.ToolsMode); err != nil {
			return tenants.InstallRequest{}, err
		}
		req.ToolsMode = *b.ToolsMode
	}
	return req, nil
}

// withoutAuthModes reports whether the catalog's connector id declares no
// auth modes.
func withoutAuthModes(cat *registry.Catalog, id string) bool {
	if cat == nil {
		return false
	}
	c, ok := cat.Connector(id)
	return ok && len(c.Manifest.Auth.Modes) == 0
}

func (s *Server) putInstance(c echo.Context) error {
	var body installBody
	if err := decode(c, &body); err != nil {
		return err
	}
	req, err := body.request(s.cfg.Catalog)
	if err != nil {
		return err
	}
	view, created, err := s.cfg.Tenants.Install(c.Request().Context(), c.Param("tenant"), c.Param("instance"), req)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return c.JSON(code, view)
}

// patchInstance changes only the properties the body holds.
func (s *Server) patchInstance(c echo.Context) error {
	var body installBody
	if err := decode(c, &body); err != nil {
		return err
	}
	fields, err := body.fields()
	if err != nil {
		return err
	}
	view, err := s.cfg.Tenants.Patch(c.Request().Context(), c.Param("tenant"), c.Param("instance"),
		tenants.InstancePatch{ConnectorID: body.ConnectorID, AuthMode: body.AuthMode, Agents: body.Agents, Fields: fields, ToolsMode: body.ToolsMode})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, view)
}

// logAttention writes a warning for every field row of the views that
// does not decrypt, naming the row (tenant, instance, field), never a
// value, so that an operator finds it.
func (s *Server) logAttention(c echo.Context, tenant string, views ...*tenants.InstanceView) {
	for _, v := range views {
		for _, name := range v.Undecryptable() {
			s.logger(c).Warn("instance field does not decrypt", "tenant", tenant, "tenant_id", string(v.TenantID),
				"instance", v.Slug, "owner", v.SecretOwner(), "field", name)
		}
	}
}

// MemberInstanceView is an instance as a tenant member sees it: what it
// is and whether it is usable, never its configuration (fields, agent
// allowlist, verification details).
type MemberInstanceView struct {
	Slug             string `json:"slug"`
	ConnectorID      string `json:"connector_id"`
	ConnectorVersion string `json:"connector_version"`
	AuthMode         string `json:"auth_mode"`
	AuthState        string `json:"auth_state"`
}

func memberViews(list ...*tenants.InstanceView) []MemberInstanceView {
	out := make([]MemberInstanceView, 0, len(list))
	for _, v := range list {
		out = append(out, MemberInstanceView{Slug: v.Slug, ConnectorID: v.ConnectorID, ConnectorVersion: v.ConnectorVersion,
			AuthMode: v.AuthMode, AuthState: v.AuthState})
	}
	return out
}

func (s *Server) listInstances(c echo.Context) error {
	q, err := pageQuery(c)
	if err != nil {
		return err
	}
	list, next, err := s.cfg.Tenants.InstancesPage(c.Request().Context(), c.Param("tenant"), q)
	if err != nil {
		return err
	}
	if !principalOf(c).admin() {
		return listPage(c, map[string]any{"instances": memberViews(list...)}, next)
	}
	s.logAttention(c, c.Param("tenant"), list...)
	return listPage(c, map[string]any{"instances": list}, next)
}

func (s *Server) getInstance(c echo.Context) error {
	v, err := s.cfg.Tenants.Instance(c.Request().Context(), c.Param("tenant"), c.Param("instance"))
	if err != nil {
		return err
	}
	if !principalOf(c).admin() {
		return c.JSON(http.StatusOK, memberViews(v)[0])
	}
	s.logAttention(c, c.Param("tenant"), v)
	return c.JSON(http.StatusOK, v)
}

func (s *Server) deleteInstance(c echo.Context) error {
	if err := s.cfg.Tenants.DeleteInstance(c.Request().Context(), c.Param("tenant"), c.Param("instance")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// CreatedCaller is the response to POST /v1/tenants/{tenant}/callers: the
// caller and its token. It is the one response of the API that renders a
// secret value, once; the token is not stored and cannot be shown again.
type CreatedCaller struct {
	*tenants.Caller
	Token string `json:"token"`
}

func (s *Server) createCaller(c echo.Context) error {
	var req tenants.CallerRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	caller, token, err := s.cfg.Tenants.CreateCaller(c.Request().Context(), c.Param("tenant"), req)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, CreatedCaller{Caller: caller, Token: token.Reveal()})
}

func (s *Server) listCallers(c echo.Context) error {
	q, err := pageQuery(c)
	if err != nil {
		return err
	}
	list, next, err := s.cfg.Tenants.CallersPage(c.Request().Context(), c.Param("tenant"), q)
	if err != nil {
		return err
	}
	return listPage(c, map[string]any{"callers": list}, next)
}

func (s *Server) revokeCaller(c echo.Context) error {
	caller, err := s.cfg.Tenants.RevokeCaller(c.Request().Context(), c.Param("tenant"), switchboard.CallerID(c.Param("caller")))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, caller)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
