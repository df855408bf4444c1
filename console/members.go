package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/api"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
)

// The Members page: the tenant's members and pending invitations.
// Admins and owners see it and invite (only owners invite owners); only
// owners change roles and remove members, as in the /v1 route table. An
// invitation's one-time link is rendered in the POST's response only.

var errOwnerRole = switchboard.E(switchboard.ErrForbidden, "role_required",
	"only an owner of the tenant may change roles or remove members")

// ownerTenant admits an owner to a role change or removal.
func (c *Console) ownerTenant(ec echo.Context, v *Viewer) (*tenants.Tenant, error) {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return nil, err
	}
	if !switchboard.Role(v.Session.Role).AtLeast(switchboard.RoleOwner) {
		return nil, errOwnerRole
	}
	return t, nil
}

// memberRoles are the roles of a tenant, least first.
var memberRoles = []choice{
	{string(members.RoleMember), "Member", "Uses the tenant's instances through agents and connects their own accounts."},
	{string(members.RoleAdmin), "Admin", "Also installs and configures instances, and manages callers, API keys and invitations."},
	{string(members.RoleOwner), "Owner", "Also changes roles and removes members."},
}

// inviteLifetimes are how long an invitation link stays usable, in hours.
var inviteLifetimes = []choice{
	{"24", "24 hours", ""},
	{"168", "7 days", ""},
	{"720", "30 days", ""},
}

// inviteForm is what the invitation form holds.
type inviteForm struct {
	Email, Role, Lifetime string
}

// memberRow is one member in the list.
type memberRow struct {
	members.Member
	// Self is the viewer's own row.
	Self bool
}

// Joined formats when the member joined.
func (r memberRow) Joined() string { return stamp(&r.CreatedAt) }

// invitationRow is one pending invitation.
type invitationRow struct {
	members.Invitation
}

// Expires formats when the invitation's link stops working.
func (r invitationRow) Expires() string { return stamp(&r.ExpiresAt) }

// membersData is the Members page.
type membersData struct {
	Tenant      string
	Members     []memberRow
	Invitations []invitationRow
	// Pager pages the members, InvitationsPager the invitations.
	Pager, InvitationsPager pager
	// Owner is set when the viewer may change roles and remove members.
	Owner bool
	// Roles are the roles the viewer may give: in invitations (owner only
	// for owners) and role changes.
	Roles     []choice
	Lifetimes []choice
	Form      inviteForm
	CSRF      string
	Problem   *errorData
}

func (membersData) title() string { return "Members" }

// memberList renders the members, pending invitations and the invitation
// form.
func (c *Console) memberList(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	return c.renderMembers(ec, v, t, http.StatusOK, inviteForm{Role: string(members.RoleMember), Lifetime: "24"}, nil)
}

func (c *Console) renderMembers(ec echo.Context, v *Viewer, t *tenants.Tenant, status int, f inviteForm, problem *errorData) error {
	ctx := ec.Request().Context()
	people, next, err := c.cfg.Members.MembersPage(ctx, t.ID, pageOf(ec, "cursor"))
	if err != nil {
		return err
	}
	invs, nextInv, err := c.cfg.Members.InvitationsPage(ctx, t.ID, pageOf(ec, "invitations_cursor"))
	if err != nil {
		return err
	}
	owner := switchboard.Role(v.Session.Role).AtLeast(switchboard.RoleOwner)
	d := membersData{Tenant: t.Name, Owner: owner, Roles: memberRoles, Lifetimes: inviteLifetimes, Form: f, CSRF: v.CSRF, Problem: problem,
		Pager: pagerOf(ec, "/console/members", "cursor", next), InvitationsPager: pagerOf(ec, "/console/members", "invitations_cursor", nextInv)}
	if !owner {
		d.Roles = memberRoles[:2]
	}
	for _, m := range people {
		d.Members = append(d.Members, memberRow{Member: m, Self: m.UserID == v.Session.UserID})
	}
	for _, inv := range invs {
		if inv.Kind == members.KindInvite {
			d.Invitations = append(d.Invitations, invitationRow{inv})
		}
	}
	c.render(ec, status, "members", v, d)
	return nil
}

// createdInvitationData is the one page that shows an invitation's link.
type createdInvitationData struct {
	Invitation members.Invitation
	Link       string
	Expires    string
}

func (createdInvitationData) title() string { return "Invitation created" }

var errInviteLifetime = switchboard.E(switchboard.ErrInvalid, "invalid_lifetime", "choose one of the offered lifetimes")

// invite creates an invitation (the admin API's Invite, as POST
// /v1/tenants/{t}/invitations) and shows its one-time link, this once:
// the person may not get an email, so the inviter can pass it on.
func (c *Console) invite(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	form := ec.Request().PostForm
	f := inviteForm{Email: form.Get("email"), Role: form.Get("role"), Lifetime: form.Get("lifetime")}
	hours, err := strconv.Atoi(f.Lifetime)
	if err != nil || hours < 1 || time.Duration(hours)*time.Hour > members.MaxInvitationLifetime {
		p := problemData(errInviteLifetime)
		return c.renderMembers(ec, v, t, p.Status, f, p)
	}
	inv, token, err := c.cfg.Admin.Invite(ec.Request().Context(), v.Session.UserID, switchboard.Role(v.Session.Role), t.ID,
		f.Email, members.Role(f.Role), time.Duration(hours)*time.Hour)
	if err != nil {
		return refused(err, func(p *errorData) error { return c.renderMembers(ec, v, t, p.Status, f, p) })
	}
	c.render(ec, http.StatusOK, "invitation-created", v, createdInvitationData{Invitation: inv,
		Link: signin.LinkURL(c.cfg.PublicURL, token.Reveal()), Expires: stamp(&inv.ExpiresAt)})
	return nil
}

// revokeInvitation makes a pending invitation's link unusable.
func (c *Console) revokeInvitation(ec echo.Context, v *Viewer) error {
	t, err := c.adminTenant(ec, v)
	if err != nil {
		return err
	}
	if err := c.cfg.Members.RevokeInvitation(ec.Request().Context(), v.Session.UserID, t.ID, ec.Param("invitation")); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"members")
}

// setRole changes a member's role (owners only; the members store's
// SetRole, as PATCH /v1/tenants/{t}/members/{u}): their sessions are
// rotated at their next request; the last owner cannot be demoted.
func (c *Console) setRole(ec echo.Context, v *Viewer) error {
	t, err := c.ownerTenant(ec, v)
	if err != nil {
		return err
	}
	role, err := members.ParseRole(ec.Request().PostForm.Get("role"))
	if err != nil {
		return err
	}
	if _, err := c.cfg.Members.SetRole(ec.Request().Context(), v.Session.UserID, t.ID, ec.Param("user"), role); err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"members")
}

// removalData is the confirmation of a member's removal: exactly what it
// revokes, named.
type removalData struct {
	Tenant string
	Member members.Member
	// Sessions is the number of the member's live sessions.
	Sessions int
	// Keys are the live API keys that act as the member or that they
	// created.
	Keys []*tenants.APIKey
	// GrantInstances are the instances that hold a grant per user (OAuth),
	// whose grant of the member removal disconnects.
	GrantInstances []string
	Self           bool
	CSRF           string
}

func (d removalData) title() string { return "Remove " + d.Member.Email }

// removeConfirm shows what removing the member revokes, with the form
// that does it.
func (c *Console) removeConfirm(ec echo.Context, v *Viewer) error {
	t, err := c.ownerTenant(ec, v)
	if err != nil {
		return err
	}
	ctx := ec.Request().Context()
	m, err := c.cfg.Members.Member(ctx, t.ID, ec.Param("user"))
	if err != nil {
		return err
	}
	sessions, err := c.cfg.Members.Sessions(ctx, t.ID, m.UserID)
	if err != nil {
		return err
	}
	keys, err := c.cfg.APIKeys.List(ctx, t.ID)
	if err != nil {
		return err
	}
	instances, err := c.cfg.Tenants.ListInstances(ctx, t.Slug)
	if err != nil {
		return err
	}
	d := removalData{Tenant: t.Name, Member: m, Sessions: len(sessions), Self: m.UserID == v.Session.UserID, CSRF: v.CSRF}
	now := time.Now()
	for _, k := range keys {
		// The keys APIKeys.RevokeUser revokes: live, and acting as the
		// member or created by them.
		live := k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
		if live && (k.UserID == m.UserID || k.CreatedBy == m.UserID) {
			d.Keys = append(d.Keys, k)
		}
	}
	for _, in := range instances {
		if api.PerUserGrants(in.AuthMode) {
			d.GrantInstances = append(d.GrantInstances, in.Slug)
		}
	}
	c.render(ec, http.StatusOK, "member-remove", v, d)
	return nil
}

// removedData is what a removal did.
type removedData struct {
	Email   string
	Removal api.MemberRemoval
	Kept    bool
}

func (removedData) title() string { return "Member removed" }

var errGrantsChoice = switchboard.E(switchboard.ErrInvalid, "invalid_grants", "grants must be revoke (the default) or keep")

// removeMember removes the member (owners only; the admin API's
// RemoveMember, as DELETE /v1/tenants/{t}/members/{u}): membership and
// sessions, their API keys and, unless kept, their OAuth grants.
func (c *Console) removeMember(ec echo.Context, v *Viewer) error {
	t, err := c.ownerTenant(ec, v)
	if err != nil {
		return err
	}
	ctx := ec.Request().Context()
	keep := false
	switch ec.Request().PostForm.Get("grants") {
	case "", "revoke":
	case "keep":
		keep = true
	default:
		return errGrantsChoice
	}
	m, err := c.cfg.Members.Member(ctx, t.ID, ec.Param("user"))
	if err != nil {
		return err
	}
	out, err := c.cfg.Admin.RemoveMember(ctx, v.Session.UserID, t, m.UserID, keep)
	if err != nil {
		return err
	}
	c.render(ec, http.StatusOK, "member-removed", v, removedData{Email: m.Email, Removal: out, Kept: keep})
	return nil
}
