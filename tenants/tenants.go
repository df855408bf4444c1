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
)

// Tenant is a workspace.
type Tenant struct {
	ID        switchboard.TenantID `json:"id"`
	Slug      string               `json:"slug"`
	Name      string               `json:"name"`
	CreatedAt time.Time            `json:"created_at"`
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
	// Revision increases on every change; caches compare it.
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
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
	AgentID   string     `json:"agent_id,omitempty"`
	UserID    string     `json:"user_id,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}
