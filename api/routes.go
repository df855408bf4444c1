package api

import (
	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
)

// need is what a /v1 route requires of its principal.
type need int

const (
	// needOperator: the platform operator only (tenants as a whole, the
	// central OAuth provider registry, operator tokens).
	needOperator need = iota + 1
	// needSignedIn: any principal (the connector catalog).
	needSignedIn
	// needMember: a member of the path's tenant or above; what the
	// handler shows depends on the role (a member gets the reduced view).
	needMember
	// needSelf: a member of the path's tenant, acting on their own rows
	// only (own grants, own audit rows); admins and above on anyone's.
	needSelf
	// needAdmin: an admin of the path's tenant or its owner.
	needAdmin
	// needOwner: the tenant's owner.
	needOwner
	// needCaller: a caller credential of the path's tenant (sbc_ key or
	// caller JWT), which the handler authenticates; else a principal as
	// for needSelf.
	needCaller
)

// errOwnerOnly refuses an admin what only owners may do inside an admin
// route: invite an owner.
var errOwnerOnly = switchboard.E(switchboard.ErrForbidden, "role_required", "only an owner of the tenant may make someone an owner")

// role is the least tenant role that satisfies n.
func (n need) role() switchboard.Role {
	switch n {
	case needMember, needSelf, needCaller:
		return switchboard.RoleMember
	case needAdmin:
		return switchboard.RoleAdmin
	case needOwner:
		return switchboard.RoleOwner
	}
	return ""
}

// route is one /v1 route and the role it needs.
type route struct {
	method, path string
	need         need
	handler      func(*Server) echo.HandlerFunc
}

// routes is the one table of the /v1 API: every route declares what it
// needs here, and nowhere else. A test calls every registered route with
// every role and checks the exact status, so a route added without an
// entry fails it.
var routes = []route{
	{"POST", "/v1/tenants", needOperator, func(s *Server) echo.HandlerFunc { return s.createTenant }},
	{"GET", "/v1/tenants", needOperator, func(s *Server) echo.HandlerFunc { return s.listTenants }},
	{"GET", "/v1/tenants/:tenant", needMember, func(s *Server) echo.HandlerFunc { return s.getTenant }},
	{"PATCH", "/v1/tenants/:tenant", needAdmin, func(s *Server) echo.HandlerFunc { return s.patchTenant }},
	{"GET", "/v1/connectors", needSignedIn, func(s *Server) echo.HandlerFunc { return s.listConnectors }},
	{"GET", "/v1/connectors/:connector", needSignedIn, func(s *Server) echo.HandlerFunc { return s.getConnector }},
	{"GET", "/v1/connectors/:connector/icons/:size", needSignedIn, func(s *Server) echo.HandlerFunc { return s.getConnectorIcon }},
	{"PUT", "/v1/tenants/:tenant/instances/:instance", needAdmin, func(s *Server) echo.HandlerFunc { return s.putInstance }},
	{"PATCH", "/v1/tenants/:tenant/instances/:instance", needAdmin, func(s *Server) echo.HandlerFunc { return s.patchInstance }},
	{"GET", "/v1/tenants/:tenant/instances", needMember, func(s *Server) echo.HandlerFunc { return s.listInstances }},
	{"GET", "/v1/tenants/:tenant/instances/:instance", needMember, func(s *Server) echo.HandlerFunc { return s.getInstance }},
	{"DELETE", "/v1/tenants/:tenant/instances/:instance", needAdmin, func(s *Server) echo.HandlerFunc { return s.deleteInstance }},
	{"POST", "/v1/tenants/:tenant/instances/:instance/test", needAdmin, func(s *Server) echo.HandlerFunc { return s.testInstance }},
	{"POST", "/v1/tenants/:tenant/instances/:instance/connect-links", needCaller, func(s *Server) echo.HandlerFunc { return s.createConnectLink }},
	{"GET", "/v1/tenants/:tenant/instances/:instance/grant", needSelf, func(s *Server) echo.HandlerFunc { return s.grantStatus }},
	{"POST", "/v1/tenants/:tenant/instances/:instance/grant/connect", needSelf, func(s *Server) echo.HandlerFunc { return s.grantConnect }},
	{"DELETE", "/v1/tenants/:tenant/instances/:instance/grant", needSelf, func(s *Server) echo.HandlerFunc { return s.grantDisconnect }},
	{"GET", "/v1/tenants/:tenant/instances/:instance/settings", needSelf, func(s *Server) echo.HandlerFunc { return s.getUserSettings }},
	{"PUT", "/v1/tenants/:tenant/instances/:instance/settings", needSelf, func(s *Server) echo.HandlerFunc { return s.putUserSettings }},
	{"DELETE", "/v1/tenants/:tenant/instances/:instance/settings", needSelf, func(s *Server) echo.HandlerFunc { return s.deleteUserSettings }},
	{"POST", "/v1/tenants/:tenant/callers", needAdmin, func(s *Server) echo.HandlerFunc { return s.createCaller }},
	{"GET", "/v1/tenants/:tenant/callers", needAdmin, func(s *Server) echo.HandlerFunc { return s.listCallers }},
	{"DELETE", "/v1/tenants/:tenant/callers/:caller", needAdmin, func(s *Server) echo.HandlerFunc { return s.revokeCaller }},
	{"POST", "/v1/tenants/:tenant/api-keys", needAdmin, func(s *Server) echo.HandlerFunc { return s.createAPIKey }},
	{"GET", "/v1/tenants/:tenant/api-keys", needAdmin, func(s *Server) echo.HandlerFunc { return s.listAPIKeys }},
	{"DELETE", "/v1/tenants/:tenant/api-keys/:key", needAdmin, func(s *Server) echo.HandlerFunc { return s.revokeAPIKey }},
	{"POST", "/v1/tenants/:tenant/invitations", needAdmin, func(s *Server) echo.HandlerFunc { return s.createInvitation }},
	{"GET", "/v1/tenants/:tenant/invitations", needAdmin, func(s *Server) echo.HandlerFunc { return s.listInvitations }},
	{"GET", "/v1/tenants/:tenant/members", needAdmin, func(s *Server) echo.HandlerFunc { return s.listMembers }},
	{"PATCH", "/v1/tenants/:tenant/members/:user", needOwner, func(s *Server) echo.HandlerFunc { return s.setMemberRole }},
	{"DELETE", "/v1/tenants/:tenant/members/:user", needOwner, func(s *Server) echo.HandlerFunc { return s.removeMember }},
	{"GET", "/v1/tenants/:tenant/audit", needSelf, func(s *Server) echo.HandlerFunc { return s.listAudit }},
	{"GET", "/v1/tenants/:tenant/audit/export", needAdmin, func(s *Server) echo.HandlerFunc { return s.exportAudit }},
	{"GET", "/v1/tenants/:tenant/audit/retention", needAdmin, func(s *Server) echo.HandlerFunc { return s.getAuditRetention }},
	{"PUT", "/v1/tenants/:tenant/audit/retention", needOwner, func(s *Server) echo.HandlerFunc { return s.putAuditRetention }},
	{"GET", "/v1/tenants/:tenant/limits", needAdmin, func(s *Server) echo.HandlerFunc { return s.getLimits }},
	{"PUT", "/v1/tenants/:tenant/limits", needAdmin, func(s *Server) echo.HandlerFunc { return s.putLimits }},
	{"GET", "/v1/tenants/:tenant/usage", needAdmin, func(s *Server) echo.HandlerFunc { return s.tenantUsage }},
	{"GET", "/v1/usage", needOperator, func(s *Server) echo.HandlerFunc { return s.usageByTenant }},
	{"PUT", "/v1/providers/:provider", needOperator, func(s *Server) echo.HandlerFunc { return s.putProvider }},
	{"GET", "/v1/providers", needOperator, func(s *Server) echo.HandlerFunc { return s.listProviders }},
	{"GET", "/v1/providers/:provider", needOperator, func(s *Server) echo.HandlerFunc { return s.getProvider }},
	{"DELETE", "/v1/providers/:provider", needOperator, func(s *Server) echo.HandlerFunc { return s.deleteProvider }},
	{"POST", "/v1/operator-tokens", needOperator, func(s *Server) echo.HandlerFunc { return s.createOperatorToken }},
	{"GET", "/v1/operator-tokens", needOperator, func(s *Server) echo.HandlerFunc { return s.listOperatorTokens }},
	{"DELETE", "/v1/operator-tokens/:token", needOperator, func(s *Server) echo.HandlerFunc { return s.revokeOperatorToken }},
	{"POST", "/v1/operator-sign-in-links", needOperator, func(s *Server) echo.HandlerFunc { return s.createOperatorLink }},
}
