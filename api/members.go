package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenants"
)

// RoleChange is the body of PATCH /v1/tenants/{tenant}/members/{user}.
type RoleChange struct {
	Role string `json:"role"`
}

// MemberRemoval answers DELETE /v1/tenants/{tenant}/members/{user}: what
// the removal revoked besides the membership and its sessions.
type MemberRemoval struct {
	UserID string `json:"user_id"`
	// APIKeysRevoked counts the member's tenant API keys (acting as them
	// or created by them) revoked.
	APIKeysRevoked int `json:"api_keys_revoked"`
	// GrantsRevoked lists the per-user instances whose grant of the
	// member was disconnected (revoked at the provider when its connector
	// declares a revocation endpoint, and deleted); empty with
	// ?grants=keep.
	GrantsRevoked []string `json:"grants_revoked"`
	// GrantsFailed lists the instances whose grant could not be
	// disconnected, with the error code; an operator retries with
	// DELETE .../instances/{instance}/grant?user_id=.
	GrantsFailed map[string]string `json:"grants_failed,omitempty"`
	// RevocationsFailed lists the instances whose provider did not accept
	// the revocation of the member's token, with the error code; their
	// grants were deleted all the same (revocation is best effort).
	RevocationsFailed map[string]string `json:"revocations_failed,omitempty"`
}

func (s *Server) listMembers(c echo.Context) error {
	if s.cfg.Members == nil {
		return errNoMembers
	}
	return tenantPage(s, c, "members", s.cfg.Members.MembersPage)
}

// listInvitations lists the tenant's invitations and sign-in links that
// are neither used nor expired, newest first (never their links: only
// their hashes are stored).
func (s *Server) listInvitations(c echo.Context) error {
	if s.cfg.Members == nil {
		return errNoMembers
	}
	return tenantPage(s, c, "invitations", s.cfg.Members.InvitationsPage)
}

// setMemberRole changes a member's role (owners only, by the route
// table). Their sessions carry the old role and are rotated at their next
// request; the last owner cannot be demoted.
func (s *Server) setMemberRole(c echo.Context) error {
	if s.cfg.Members == nil {
		return errNoMembers
	}
	var req RoleChange
	if err := decode(c, &req); err != nil {
		return err
	}
	role, err := members.ParseRole(req.Role)
	if err != nil {
		return err
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	m, err := s.cfg.Members.SetRole(c.Request().Context(), principalOf(c).Actor, t.ID, c.Param("user"), role)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// removeMember removes a member (owners only, by the route table): their
// membership and sessions, their tenant API keys and, unless
// ?grants=keep, their per-user OAuth grants on every instance. Sessions
// and keys are checked against the store on every request, so no replica
// accepts them once this returns; a disconnected grant is announced to
// the other replicas' token caches (LISTEN/NOTIFY).
func (s *Server) removeMember(c echo.Context) error {
	if s.cfg.Members == nil {
		return errNoMembers
	}
	keepGrants := false
	switch c.QueryParam("grants") {
	case "", "revoke":
	case "keep":
		keepGrants = true
	default:
		return switchboard.E(switchboard.ErrInvalid, "invalid_grants", "grants must be revoke (the default) or keep")
	}
	t, err := s.pathTenant(c)
	if err != nil {
		return err
	}
	out, err := s.RemoveMember(c.Request().Context(), principalOf(c).Actor, t, c.Param("user"), keepGrants)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// RemoveMember removes user from the tenant for actor: their membership
// and sessions, their tenant API keys (acting as them or created by them)
// and, unless keepGrants, their per-user OAuth grants on every instance
// (revoked at the provider when its connector declares a revocation
// endpoint, and deleted), each with its audit row. The /v1 route and the
// console's Members page remove members through it. Sessions and keys
// are checked against the store on every request, so no replica accepts
// them once this returns; a disconnected grant is announced to the other
// replicas' token caches (LISTEN/NOTIFY).
func (s *Server) RemoveMember(ctx context.Context, actor string, t *tenants.Tenant, user string, keepGrants bool) (MemberRemoval, error) {
	if s.cfg.Members == nil {
		return MemberRemoval{}, errNoMembers
	}
	if err := s.cfg.Members.RemoveMember(ctx, actor, t.ID, user); err != nil {
		return MemberRemoval{}, err
	}
	out := MemberRemoval{UserID: user, GrantsRevoked: []string{}}
	log := s.loggerOf(ctx).With("tenant", t.Slug, "user", user, "actor", actor)
	if s.cfg.APIKeys != nil {
		// The membership is gone already: a failure here is reported, and
		// the keys are revoked by a retry of the removal's key step
		// (DELETE .../api-keys/{key}).
		var err error
		if out.APIKeysRevoked, err = s.cfg.APIKeys.RevokeUser(ctx, t.ID, user); err != nil {
			return MemberRemoval{}, err
		}
	}
	if !keepGrants && s.cfg.Grants != nil {
		list, err := s.cfg.Tenants.ListInstances(ctx, t.Slug)
		if err != nil {
			return MemberRemoval{}, err
		}
		for _, in := range list {
			if !PerUserGrants(in.AuthMode) {
				continue
			}
			d, err := s.cfg.Grants.Disconnect(ctx, t.Slug, in.Slug, user)
			if err != nil {
				if out.GrantsFailed == nil {
					out.GrantsFailed = map[string]string{}
				}
				out.GrantsFailed[in.Slug] = switchboard.CodeOf(err)
				log.Warn("removed member's grant not disconnected", "instance", in.Slug, "err", err.Error())
				continue
			}
			s.recordDisconnect(actor, t.ID, in.Slug, user, d)
			if d.RevokeFailed != "" {
				if out.RevocationsFailed == nil {
					out.RevocationsFailed = map[string]string{}
				}
				out.RevocationsFailed[in.Slug] = d.RevokeFailed
			}
			out.GrantsRevoked = append(out.GrantsRevoked, in.Slug)
		}
	}
	if out.APIKeysRevoked > 0 {
		s.recordAs(actor, t.ID, "", user, "api_key.revoke_member")
	}
	log.Info("member removed", "api_keys_revoked", out.APIKeysRevoked, "grants_revoked", len(out.GrantsRevoked))
	return out, nil
}

// PerUserGrants reports whether an instance of auth mode holds a grant
// per user (OAuth), which removing a member disconnects.
func PerUserGrants(mode string) bool {
	return mode == registry.ModeOAuth || mode == registry.ModeOAuthCentral
}
