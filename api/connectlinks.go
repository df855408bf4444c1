package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/tenants"
)

// ConnectLinks mints connect links; *connectflow.Pages is one.
type ConnectLinks interface {
	// MintLink mints for the caller of r's credential.
	MintLink(ctx context.Context, r *http.Request, tenantSlug, instanceSlug, target string) (*auth.ConnectLink, error)
	// MintFor mints for user, who must be a member of the tenant, on
	// behalf of createdBy (an API principal).
	MintFor(ctx context.Context, tenantSlug, instanceSlug, user, createdBy string) (*auth.ConnectLink, error)
}

// ConnectLinkRequest is the optional body of POST
// /v1/tenants/{tenant}/instances/{instance}/connect-links: the user the
// link is for (a trusted caller's targetUserId); empty is the requester's
// own user.
type ConnectLinkRequest struct {
	TargetUserID string `json:"targetUserId,omitempty"`
}

// callerCredential reports whether r bears a caller credential (a
// bearer token that is neither an operator token nor a tenant API key),
// which the connect-link minter authenticates.
func callerCredential(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get(echo.HeaderAuthorization), " ")
	token = strings.TrimSpace(token)
	return ok && strings.EqualFold(scheme, "Bearer") && token != "" &&
		!strings.HasPrefix(token, tenants.APIKeyPrefix) && !strings.HasPrefix(token, auth.OperatorTokenPrefix)
}

// createConnectLink answers 201 with a connect link. A caller is
// authenticated by the minter; a principal (a member's session or API
// key) mints for its own user, the operator and admins for any member.
func (s *Server) createConnectLink(c echo.Context) error {
	if s.cfg.ConnectLinks == nil {
		return switchboard.E(switchboard.ErrUnavailable, "oauth_unavailable", "connect links are not enabled on this server")
	}
	var req ConnectLinkRequest
	if c.Request().ContentLength != 0 {
		if err := decode(c, &req); err != nil {
			return err
		}
	}
	ctx, tenant, instance := c.Request().Context(), c.Param("tenant"), c.Param("instance")
	var link *auth.ConnectLink
	var err error
	if p := principalOf(c); p != nil {
		user := req.TargetUserID
		switch {
		case user != "" && user != p.UserID && !p.admin():
			return errRole
		case user == "" && p.UserID == "":
			return errNoSelf
		case user == "":
			user = p.UserID
		}
		link, err = s.cfg.ConnectLinks.MintFor(ctx, tenant, instance, user, p.Actor)
	} else {
		link, err = s.cfg.ConnectLinks.MintLink(ctx, c.Request(), tenant, instance, req.TargetUserID)
	}
	if err != nil {
		return err
	}
	// The audit row names who minted the link and for whom, never its token.
	if s.cfg.AuditLog != nil {
		s.cfg.AuditLog.Record(audit.Entry{Tenant: link.Tenant, Instance: link.Instance, Actor: link.CreatedBy,
			Subject: link.User, Tool: "admin", Action: "connect_link.create", Outcome: "ok"})
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, link)
}
