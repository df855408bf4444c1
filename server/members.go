package server

import (
	"context"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
)

// memberCheck is auth.Members over the members store: whether a user a
// caller names is a member of the tenant.
type memberCheck struct{ store *members.Store }

// IsMember reports whether user is a member of tenant.
func (m memberCheck) IsMember(ctx context.Context, tenant switchboard.TenantID, user string) (bool, error) {
	_, err := m.store.Member(ctx, tenant, user)
	if switchboard.CodeOf(err) == "member_not_found" {
		return false, nil
	}
	return err == nil, err
}
