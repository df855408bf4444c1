package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/signin"
)

var errNoMembers = switchboard.E(switchboard.ErrUnavailable, "members_unavailable", "members are not enabled on this server")

// invitationRequest is the body of POST /v1/tenants/{tenant}/invitations.
type invitationRequest struct {
	Email string       `json:"email"`
	Role  members.Role `json:"role"`
	// LifetimeSeconds is how long the link stays usable; 0 is 24 hours.
	LifetimeSeconds int64 `json:"lifetime_seconds"`
}

// createdInvitation is the answer: the invitation and its link, shown
// once (only the link token's hash is stored).
type createdInvitation struct {
	members.Invitation
	URL string `json:"url"`
}

// createInvitation mints an invitation of an email to the tenant with a
// role; opening its URL within its lifetime makes the person a member and
// signs them in.
func (s *Server) createInvitation(c echo.Context) error {
	if s.cfg.Members == nil {
		return errNoMembers
	}
	var req invitationRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	t, err := s.cfg.Tenants.Tenant(ctx, c.Param("tenant"))
	if err != nil {
		return err
	}
	if req.LifetimeSeconds < 0 || req.LifetimeSeconds > int64(members.MaxInvitationLifetime/time.Second) {
		return switchboard.E(switchboard.ErrInvalid, "invalid_lifetime", "lifetime_seconds is between 1 and %d (0: 24 hours)",
			int64(members.MaxInvitationLifetime/time.Second))
	}
	inviter, actor := members.RoleOwner, members.ActorOperator // the operator may invite owners
	if p := principalOf(c); p != nil && !p.Operator {
		inviter = p.Role
	}
	if p := principalOf(c); p != nil && p.Actor != "" {
		actor = p.Actor
	}
	inv, token, err := s.Invite(ctx, actor, inviter, t.ID, req.Email, req.Role, time.Duration(req.LifetimeSeconds)*time.Second)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, createdInvitation{Invitation: inv, URL: signin.LinkURL(s.cfg.PublicURL, token.Reveal())})
}

// Invite invites email to the tenant with role, for actor whose role is
// inviter: only an owner may make someone an owner. The /v1 route and the
// console's Members page invite through it. The returned token (the link
// is signin.LinkURL of it) is shown once.
func (s *Server) Invite(ctx context.Context, actor string, inviter members.Role, tenant switchboard.TenantID, email string, role members.Role, ttl time.Duration) (members.Invitation, secrets.Secret, error) {
	if s.cfg.Members == nil {
		return members.Invitation{}, secrets.Secret{}, errNoMembers
	}
	if role == members.RoleOwner && !inviter.AtLeast(members.RoleOwner) {
		return members.Invitation{}, secrets.Secret{}, errOwnerOnly
	}
	return s.cfg.Members.Invite(ctx, actor, tenant, email, role, ttl)
}
