package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/tenants"
)

// Principal is who makes an admin API request: the platform operator
// (every right in every tenant), or someone of one tenant with a role (a
// tenant API key today; a member's session once sign-in is wired).
type Principal struct {
	// Operator is set for the platform operator's token.
	Operator bool
	// Tenant and Role scope everyone else.
	Tenant switchboard.TenantID
	Role   switchboard.Role
	// UserID is the member the principal acts as, for their own grants
	// and audit rows; empty when it acts as no one (the operator, a key
	// without a user).
	UserID string
	// Actor names the principal in audit rows and in created_by:
	// "operator" (a token), "operator:<session id>" (the operator's
	// console session), "key:<id>" or the member's user id.
	Actor string
}

// can reports whether p may use a route needing n in tenant (the
// tenant's id; empty for routes outside tenants).
func (p *Principal) can(n need) bool {
	switch {
	case p.Operator:
		return true
	case n == needOperator:
		return false
	case n == needSignedIn:
		return true
	}
	return p.Role.AtLeast(n.role())
}

// admin reports whether p sees a tenant's configuration and everyone's
// rows (operator, owner, admin), not only its own.
func (p *Principal) admin() bool { return p.Operator || p.Role.AtLeast(switchboard.RoleAdmin) }

const principalKey = "principal"

// principalOf returns the request's principal, set by authorize.
func principalOf(c echo.Context) *Principal {
	p, _ := c.Get(principalKey).(*Principal)
	return p
}

var errUnauthorized = switchboard.E(switchboard.ErrUnauthorized, "unauthorized",
	"a valid credential is required: Authorization: Bearer <operator token or tenant API key>")

// authenticate resolves the request's credential into a principal: a
// session the sign-in middleware admitted (a request without an
// Authorization header), a bearer tenant API key (prefix
// tenants.APIKeyPrefix) or an operator token.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*Principal, error) {
	if r.Header.Get(echo.HeaderAuthorization) == "" && s.cfg.Session != nil {
		if sess, ok := s.cfg.Session(ctx); ok {
			if sess.Operator {
				// The operator's console session (an operator sign-in
				// link): the operator's rights, as an operator token.
				return &Principal{Operator: true, Actor: "operator:" + sess.ID}, nil
			}
			return &Principal{Tenant: sess.Tenant, Role: switchboard.Role(sess.Role), UserID: sess.UserID, Actor: sess.UserID}, nil
		}
	}
	scheme, token, ok := strings.Cut(r.Header.Get(echo.HeaderAuthorization), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, errUnauthorized
	}
	if strings.HasPrefix(token, tenants.APIKeyPrefix) {
		if s.cfg.APIKeys == nil {
			return nil, errUnauthorized
		}
		key, err := s.cfg.APIKeys.Verify(ctx, token)
		if err != nil {
			if switchboard.CodeOf(err) == "unauthorized" {
				return nil, errUnauthorized
			}
			return nil, err
		}
		return &Principal{Tenant: key.TenantID, Role: key.Role, UserID: key.UserID, Actor: "key:" + key.ID}, nil
	}
	if s.cfg.Operators == nil {
		return nil, errUnauthorized
	}
	ok, err := s.cfg.Operators.Check(ctx, token)
	if err != nil {
		return nil, fmt.Errorf("checking the operator token: %w", err)
	}
	if !ok {
		return nil, errUnauthorized
	}
	return &Principal{Operator: true, Actor: "operator"}, nil
}

// errNoTenant is what a principal of another tenant gets for a tenant's
// routes: the same 404 as for a tenant that does not exist, so that
// tenants cannot learn of each other's slugs.
func errNoTenant(slug string) error {
	return switchboard.E(switchboard.ErrNotFound, "tenant_not_found", "tenant %q not found", truncate(slug, 64))
}

var errRole = switchboard.E(switchboard.ErrForbidden, "role_required", "your role in this tenant does not allow this")

// authorize admits a request to a route needing n: it authenticates the
// credential (401 without a valid one), checks a tenant in the path
// against the principal's tenant (404 tenant_not_found for another
// tenant's principal, exactly as for an unknown tenant), then the role
// (403 role_required).
func (s *Server) authorize(n need) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ctx := c.Request().Context()
			if n == needCaller && callerCredential(c.Request()) {
				return next(c) // the handler authenticates the caller
			}
			p, err := s.authenticate(ctx, c.Request())
			if err != nil {
				return err
			}
			if slug := c.Param("tenant"); slug != "" && !p.Operator {
				t, err := s.cfg.Tenants.Tenant(ctx, slug)
				if switchboard.CodeOf(err) == "tenant_not_found" || (err == nil && t.ID != p.Tenant) {
					return errNoTenant(slug)
				}
				if err != nil {
					return err
				}
			}
			if !p.can(n) {
				return errRole
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}
