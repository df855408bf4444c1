package switchboard

// Role is what a person or an API key may do in a tenant. Roles are
// ordered: an owner may do everything an admin may, an admin everything a
// member may.
type Role string

// The roles of a tenant.
const (
	// RoleOwner may do everything in the tenant, members included.
	RoleOwner Role = "owner"
	// RoleAdmin governs instances, callers, API keys and the audit log.
	RoleAdmin Role = "admin"
	// RoleMember sees the instances they may use, their own grants and
	// their own audit rows.
	RoleMember Role = "member"
)

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// AtLeast reports whether r grants everything min grants. An invalid role
// grants nothing.
func (r Role) AtLeast(min Role) bool { return r.Valid() && r.rank() >= min.rank() }

func (r Role) rank() int {
	switch r {
	case RoleOwner:
		return 3
	case RoleAdmin:
		return 2
	case RoleMember:
		return 1
	}
	return 0
}
