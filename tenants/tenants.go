// Package tenants owns tenants (workspaces), their app instances (a
// connector installed with an auth mode, field values and an agent
// allowlist) and their callers (credentials issued to agent platforms, cron
// jobs and knowledge sync). Every query is scoped by tenant in the store,
// from the argument, never trusted from the handler.
package tenants

import (
	"slices"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
)

// Tenant is a workspace.
type Tenant struct {
	ID        switchboard.TenantID `json:"id"`
	Slug      string               `json:"slug"`
	Name      string               `json:"name"`
	CreatedAt time.Time            `json:"created_at"`
	// MCPContextBudget is the tenant's context budget: the largest
	// tools/list, in bytes, an instance endpoint in ToolsAuto serves
	// before it serves the meta-tools instead. Nil: the operator's
	// default.
	MCPContextBudget *int `json:"mcp_context_budget"`
	// Read is the change log's position this copy was read at (set by
	// Store.CachedTenant only): the changes it already reflects.
	Read database.ChangePosition `json:"-"`
}

// Instance is a tenant's installation of a connector.
type Instance struct {
	ID               switchboard.InstanceID `json:"id"`
	TenantID         switchboard.TenantID   `json:"tenant_id"`
	Slug             string                 `json:"slug"`
	ConnectorID      string                 `json:"connector_id"`
	ConnectorVersion string                 `json:"connector_version"`
	AuthMode         string                 `json:"auth_mode"`
	// Agents is the allowlist of agent ids that may call the instance.
	Agents []string `json:"agents"`
	// AuthState is AuthReady when the connector's verification passed
	// with the instance's configuration, AuthUnverified when the instance
	// was activated without one (the connector declares none, or it needs
	// a connected user).
	AuthState string `json:"auth_state"`
	// Verification is the outcome of the last verification, secret values
	// redacted.
	Verification Verification `json:"verification"`
	// ToolsMode says what the instance endpoint's tools/list declares:
	// ToolsAuto (the default), ToolsList or ToolsMeta.
	ToolsMode string `json:"tools_mode"`
	// Revision increases on every change; caches compare it.
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Read is the change log's position this copy was read at (set by
	// Store.InstanceForCall only): the changes it already reflects.
	Read database.ChangePosition `json:"-"`
}

// Tools modes of an instance endpoint (Instance.ToolsMode).
const (
	// ToolsAuto serves ToolsList while the tools/list fits the tenant's
	// context budget, ToolsMeta when it does not.
	ToolsAuto = "auto"
	// ToolsList serves the connector's tools, one per entity.
	ToolsList = "tools"
	// ToolsMeta serves the tenant catalog's meta-tools (search,
	// describe, call, guide) scoped to the instance.
	ToolsMeta = "meta"
)

// CheckToolsMode refuses a tools mode that is not one of the three.
func CheckToolsMode(mode string) error {
	switch mode {
	case ToolsAuto, ToolsList, ToolsMeta:
		return nil
	}
	return switchboard.E(switchboard.ErrInvalid, "invalid_tools_mode",
		"tools_mode must be %q, %q or %q, not %q", ToolsAuto, ToolsList, ToolsMeta, truncate(mode, 40))
}

// Context budget bounds (Tenant.MCPContextBudget), in bytes of tools/list.
const (
	MinContextBudget = 1 << 10
	MaxContextBudget = 1 << 20
)

// CheckContextBudget refuses a context budget outside its bounds.
func CheckContextBudget(n int) error {
	if n < MinContextBudget || n > MaxContextBudget {
		return switchboard.E(switchboard.ErrInvalid, "invalid_context_budget",
			"mcp_context_budget must be between %d and %d bytes of tools/list, or null for the operator's default", MinContextBudget, MaxContextBudget)
	}
	return nil
}

// Auth states of an instance.
const (
	// AuthReady: the connector's verification passed with the instance's
	// configuration.
	AuthReady = "ready"
	// AuthUnverified: the instance was activated without a verification.
	AuthUnverified = "unverified"
)

// Verification is the outcome of a connector's verification (verify
// before save). Message and Details never hold a secret value of the
// instance: they are redacted before they are stored, logged or returned.
type Verification struct {
	// Ran reports whether a verification ran; when false, Message says
	// why not.
	Ran bool `json:"ran"`
	// OK reports whether it passed.
	OK bool `json:"ok"`
	// Kind is "probe" or "command" when it ran.
	Kind    string         `json:"kind,omitempty"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// At is when it ran.
	At *time.Time `json:"at,omitempty"`
}

// AllowsAgent reports whether agent is on the instance's allowlist. An
// empty agent id is never allowed.
func (i *Instance) AllowsAgent(agent string) bool {
	return agent != "" && slices.Contains(i.Agents, agent)
}

// SecretOwner is the owner of the instance's field rows in the secret store.
func (i *Instance) SecretOwner() string { return InstanceOwner(i.ID) }

// InstanceOwner is the secret-store owner of an instance's field rows.
func InstanceOwner(id switchboard.InstanceID) string { return "instance:" + string(id) }

// Caller kinds.
const (
	KindAgentPlatform = "agent-platform"
	KindCron          = "cron"
	KindKnowledgeSync = "knowledge-sync"
)

// ValidKind reports whether k is a caller kind.
func ValidKind(k string) bool {
	return k == KindAgentPlatform || k == KindCron || k == KindKnowledgeSync
}

// User modes: how a caller establishes the user a call acts for.
const (
	// UserFixed: the caller's own UserID (a service account), or no user.
	UserFixed = "fixed"
	// UserHeader: the platform asserts the user per request with
	// X-User-Id. Only trusted callers may.
	UserHeader = "header"
	// UserJWT: a per-request JWT signed by the platform carries the user.
	UserJWT = "jwt"
)

// MaxExternalSubjects bounds a caller's list of external subjects.
const MaxExternalSubjects = 100

// Caller is a credential a tenant issued. Only the token's hash is stored.
type Caller struct {
	ID       switchboard.CallerID `json:"id"`
	TenantID switchboard.TenantID `json:"tenant_id"`
	Name     string               `json:"name"`
	Kind     string               `json:"kind"`
	// Trusted callers may act for a targetUserId.
	Trusted bool `json:"trusted"`
	// AgentID and UserID are fixed identities carried by the credential;
	// empty means the caller names them per request (agent platforms).
	AgentID string `json:"agent_id,omitempty"`
	UserID  string `json:"user_id,omitempty"`
	// UserMode is how the user a call acts for is established: UserFixed,
	// UserHeader or UserJWT.
	UserMode string `json:"user_mode"`
	// ExternalSubjects are the users outside the tenant's members that
	// the caller may name (by header, JWT or targetUserId); "prefix*"
	// names every user id that starts with prefix.
	ExternalSubjects []string   `json:"external_subjects,omitempty"`
	CreatedAt        time.Time  `json:"created_at"`
	RevokedAt        *time.Time `json:"revoked_at,omitempty"`
	// LastUsedAt is when the caller's token last authenticated a call,
	// recorded at most once per CallerTouchInterval and server.
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}
