package auth

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/tenants"
)

// Members says whether a user is a member of a tenant. The members store
// implements it; the callers check every user a caller names against it.
type Members interface {
	IsMember(ctx context.Context, tenant switchboard.TenantID, user string) (bool, error)
}

// SetMembers makes the authenticator accept, as users a caller names
// (X-User-Id, a user JWT's subject, a targetUserId), the tenant's members
// besides the caller's external subjects. Without it only external
// subjects are accepted. Call it before serving.
func (c *Callers) SetMembers(m Members) { c.members = m }

// HeaderUserAssertion carries the per-request JWT of a caller of user mode
// jwt: signed by the platform (the caller-JWT keys), its subject is the
// user and its tenant claim the URL's tenant.
const HeaderUserAssertion = "X-User-Assertion"

// memberTTL is how long a positive membership answer is kept, so that a
// warm call costs no database round trip. A removal drops it at once
// (ForgetMember, fed by the members store's announcements); the TTL only
// bounds how long a missed announcement could let a removed member in.
const memberTTL = 5 * time.Second

// Errors of the user a caller names.
var (
	errUserAssertionRefused = switchboard.E(switchboard.ErrForbidden, "user_assertion_refused",
		"this caller may not assert users: its user mode is not header, so "+HeaderUserID+" is refused; "+
			"use a caller of user mode header (trusted platforms) or jwt")
	errUserAssertionInvalid = switchboard.E(switchboard.ErrUnauthorized, "invalid_user_assertion",
		"the "+HeaderUserAssertion+" JWT is missing its user, expired, not signed by the platform or issued for another workspace")
	errUserAssertionUnavailable = switchboard.E(switchboard.ErrUnavailable, "user_assertion_unavailable",
		"this caller names its user in a JWT, and the server accepts no caller JWTs (no --caller-jwt-keys)")
	errUserNotMember = switchboard.E(switchboard.ErrNotFound, "user_not_found",
		"no such user in this workspace: the user is neither a member nor an external subject allowed to this caller")
	errBadUserID = switchboard.E(switchboard.ErrInvalid, "invalid_user_id",
		"the user id is longer than 128 characters")
)

// establishUser sets p.UserID as the caller's user mode says: its fixed
// user, the X-User-Id header (mode header, trusted callers only) or the
// subject of the X-User-Assertion JWT (mode jwt). A caller that may not
// assert users and sends X-User-Id is refused; a named user must be a
// member of the tenant or one of the caller's external subjects.
func (c *Callers) establishUser(ctx context.Context, r *http.Request, p *Principal) error {
	asserted, sent := headerUser(r)
	switch p.Caller.UserMode {
	case tenants.UserHeader:
		if !p.Caller.Trusted {
			return errUserAssertionRefused
		}
		if len(asserted) > maxIdentity {
			return errBadUserID
		}
		p.UserID = asserted
	case tenants.UserJWT:
		if sent {
			return errUserAssertionRefused
		}
		token := strings.TrimSpace(r.Header.Get(HeaderUserAssertion))
		if token == "" {
			p.UserID = ""
			return nil
		}
		if c.jwt == nil {
			return errUserAssertionUnavailable
		}
		slug, user, _, _, _, err := c.jwt.Verify(token)
		if err != nil || slug != p.TenantSlug || user == "" {
			return errUserAssertionInvalid
		}
		p.UserID = user
	default: // fixed
		if sent {
			return errUserAssertionRefused
		}
		return nil
	}
	return c.checkNamed(ctx, p, p.UserID)
}

// headerUser returns the X-User-Id header's value and whether one was
// sent at all.
func headerUser(r *http.Request) (string, bool) {
	vs, sent := r.Header[http.CanonicalHeaderKey(HeaderUserID)]
	if !sent {
		return "", false
	}
	v := ""
	if len(vs) > 0 {
		v = strings.TrimSpace(vs[0])
	}
	return v, true
}

// CheckTarget refuses a principal whose targetUserId names a user that is
// neither a member of the tenant nor one of the caller's external
// subjects (user_not_found). Principals that act for no other user pass.
func (c *Callers) CheckTarget(ctx context.Context, p *Principal) error {
	if !p.OnBehalf() {
		return nil
	}
	return c.checkNamed(ctx, p, p.TargetUserID)
}

// CheckMember accepts user when it is a member of p's tenant (or one of
// p's caller's external subjects): the check a signed-in person reading
// MCP Resources with their own grant passes.
func (c *Callers) CheckMember(ctx context.Context, p *Principal, user string) error {
	if user == "" {
		return errUserNotMember
	}
	return c.checkNamed(ctx, p, user)
}

// checkNamed accepts user when it is empty, one of the caller's external
// subjects, or a member of the tenant.
func (c *Callers) checkNamed(ctx context.Context, p *Principal, user string) error {
	if user == "" || (p.Caller != nil && external(p.Caller.ExternalSubjects, user)) {
		return nil
	}
	if c.members == nil {
		return errUserNotMember
	}
	key := memberKey{p.Tenant, user}
	now := time.Now()
	c.memberMu.Lock()
	until, ok := c.memberSeen[key]
	gen := c.memberGen
	c.memberMu.Unlock()
	if ok && now.Before(until) {
		return nil
	}
	member, err := c.members.IsMember(ctx, p.Tenant, user)
	if err != nil {
		return err
	}
	if !member {
		return errUserNotMember
	}
	c.memberMu.Lock()
	defer c.memberMu.Unlock()
	if gen != c.memberGen {
		// A removal was heard while the store answered: the answer may
		// predate it, so it is used for this request and not kept.
		return nil
	}
	if c.memberSeen == nil || len(c.memberSeen) > maxMemberCache {
		c.memberSeen = map[memberKey]time.Time{}
	}
	c.memberSeen[key] = now.Add(memberTTL)
	return nil
}

// ForgetMember drops the cached membership of user in tenant, so that the
// next request naming them asks the store; an empty user drops every
// cached membership. Feed it the members store's removals (on this
// replica and, through LISTEN/NOTIFY, the others').
func (c *Callers) ForgetMember(tenant switchboard.TenantID, user string) {
	c.memberMu.Lock()
	defer c.memberMu.Unlock()
	c.memberGen++
	if user == "" {
		c.memberSeen = nil
		return
	}
	delete(c.memberSeen, memberKey{tenant, user})
}

// external reports whether user is one of subjects: equal to one, or
// starting with the prefix of one that ends in "*".
func external(subjects []string, user string) bool {
	for _, s := range subjects {
		if prefix, ok := strings.CutSuffix(s, "*"); ok && strings.HasPrefix(user, prefix) || s == user {
			return true
		}
	}
	return false
}

// maxMemberCache bounds the membership cache; past it, it starts over.
const maxMemberCache = 100_000

type memberKey struct {
	tenant switchboard.TenantID
	user   string
}

// memberCache is the Callers' cache of positive membership answers.
type memberCache struct {
	members    Members
	memberMu   sync.Mutex
	memberSeen map[memberKey]time.Time
	// memberGen counts forgets, so that an answer read across one is not
	// cached.
	memberGen uint64
}
