package switchboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// JSON-RPC 2.0 error codes (the specification's and MCP's) that the table
// below assigns to error codes.
const (
	RPCParseError     = -32700
	RPCInvalidRequest = -32600
	RPCMethodNotFound = -32601
	RPCInvalidParams  = -32602
	RPCInternalError  = -32603
	// RPCRefused is Switchboard's code for a request refused before any
	// method runs (caller authentication, the agent allowlist, an unknown
	// instance, a store outage); the error's data.code says which.
	RPCRefused = -32001
	// RPCResourceNotFound is MCP's code for a missing resource (session era).
	RPCResourceNotFound = -32002
	// RPCHeaderMismatch is MCP's code for an Mcp-* header that contradicts
	// the body (2026-07-28).
	RPCHeaderMismatch = -32020
)

// CodeSpec says how every transport renders the errors of one machine code:
// the admin API and App mode as an HTTP status and an ErrorBody, MCP as a
// tool result with isError and the same body, or, when a request is refused
// before any tool runs, as a JSON-RPC error with data.code.
type CodeSpec struct {
	// Kind is the vocabulary error the code's errors wrap (nil: internal).
	Kind error
	// Status is the HTTP status.
	Status int
	// RPC is the JSON-RPC error code of a request refused with this code.
	RPC int
	// Retryable reports that the same request may succeed later unchanged.
	Retryable bool
	// RetryAfter is the retryAfterMs sent when the error carries no delay
	// of its own (0: none).
	RetryAfter time.Duration
	// Challenge reports that a 401 of this code asks for a caller
	// credential (WWW-Authenticate: Bearer); an app's own upstream
	// credential being refused does not.
	Challenge bool
	// Message is the message of an error that carries none of its own
	// (a bare vocabulary kind, whose text may be internal, or a transport
	// error).
	Message string
}

// StoreRetryAfter is the delay a client is asked to wait when the store is
// unreachable: long enough not to hammer a recovering database, short
// enough that a restart (seconds) is not noticed for long.
const StoreRetryAfter = 2 * time.Second

// errorCodes is the one table from error code to HTTP status, JSON-RPC code
// and retry semantics. A test (errorcodes_test.go) scans the tree and
// fails for any code that is used but missing here, or used with another
// kind.
var errorCodes = map[string]CodeSpec{
	// Bare vocabulary kinds (CodeOf of an error that is no *Error) and
	// server faults.
	"not_found":    {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused, Message: "not found"},
	"invalid":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused, Message: "invalid request"},
	"conflict":     {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused, Message: "conflict"},
	"unauthorized": {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused, Challenge: true, Message: "unauthorized"},
	"forbidden":    {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused, Message: "forbidden"},
	"unavailable":  {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true, Message: "temporarily unavailable"},
	"internal":     {Status: http.StatusInternalServerError, RPC: RPCInternalError, Message: "an internal error occurred; it has been logged"},

	// The store (database) is unreachable: every surface, every store.
	"store_unavailable": {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true, RetryAfter: StoreRetryAfter,
		Message: "the database is temporarily unavailable; retry later"},
	// A replica's /readyz during its shutdown delay (--shutdown-delay).
	"shutting_down": {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true,
		Message: "this replica is shutting down; another one answers"},

	// Transport and protocol errors (HTTP routing, bodies, JSON-RPC).
	"route_not_found":        {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused, Message: "no such route"},
	"method_not_allowed":     {Kind: ErrInvalid, Status: http.StatusMethodNotAllowed, RPC: RPCInvalidRequest, Message: "method not allowed on this route"},
	"request_too_large":      {Kind: ErrInvalid, Status: http.StatusRequestEntityTooLarge, RPC: RPCInvalidRequest, Message: "the request body is larger than 1 MiB"},
	"response_too_large":     {Kind: ErrInvalid, Status: http.StatusRequestEntityTooLarge, RPC: RPCInternalError, Message: "the response would be too large"},
	"unsupported_media_type": {Kind: ErrInvalid, Status: http.StatusUnsupportedMediaType, RPC: RPCInvalidRequest, Message: "the request body must be application/json"},
	"bad_request":            {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCInvalidRequest, Message: "bad request"},
	"invalid_request":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCInvalidRequest, Message: "invalid request"},
	"invalid_json":           {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCParseError},
	"invalid_text":           {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCInvalidParams},
	"parse_error":            {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCParseError, Message: "malformed JSON"},
	"method_not_found":       {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCMethodNotFound, Message: "method not found"},
	"invalid_params":         {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCInvalidParams, Message: "invalid params"},
	"resource_not_found":     {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCResourceNotFound, Message: "resource not found"},
	"header_mismatch":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCHeaderMismatch},
	"forbidden_origin":       {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},

	// Caller authentication and authorization.
	"invalid_credential":         {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused, Challenge: true},
	"invalid_token":              {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused, Challenge: true},
	"insufficient_scope":         {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"missing_agent_id":           {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"agent_not_allowed":          {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"authorization_refused":      {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"user_required":              {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"user_not_found":             {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"user_assertion_refused":     {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"invalid_user_assertion":     {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused},
	"user_assertion_unavailable": {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"invalid_user_mode":          {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"operator_token_not_found":   {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"invalid_admin_token":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},

	// MCP Resources (package knowledge): a caller that may not read
	// resources (an agent, an untrusted caller, no credential beyond the
	// profile), and a targetUserId a caller may not give (ignored, audited).
	"reader_not_allowed":  {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"target_user_ignored": {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},

	// The call path: tools, operations, the app's upstream credentials.
	"invalid_arguments":  {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCInvalidParams},
	"unknown_operation":  {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCInvalidParams},
	"unknown_tool":       {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCInvalidParams}, // audited; the SDK answers it
	"reconnect_required": {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused},
	// guide_required: a call through the tenant catalog endpoint
	// (/workspaces/{tenant}/mcp) made before the connector's guide was
	// read; the error says the reason and the guide. (An address, connector
	// or instance the agent has not got is unknown_connector.)
	"guide_required": {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	// MCP Apps: a call from a view (its bridge tool, or a call its host
	// marked with _meta["io.modelcontextprotocol/ui"]) whose action writes,
	// or that is not one of its bridge's declared reads.
	"app_write_refused":    {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"app_tool_not_allowed": {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	// consent_required: the acting user has not set their own values of
	// the instance's user-scope fields; ConnectURL is where they do.
	"consent_required":        {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused},
	"auth_mode_not_available": {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"connector_unavailable":   {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	// local_capacity: every local MCP server slot of the tenant (or the
	// server) is busy; requirement_unmet: a runtime a connector requires
	// (NODE, PYTHON, DOCKER) is not installed on the server.
	"local_capacity":    {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true},
	"requirement_unmet": {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"secret_not_set":    {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"instance_changed":  {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused, Retryable: true},
	// Call admission (package admission): rate_limited (below) for a rate
	// limit or an upstream's wait, concurrency_limited for the calls in
	// flight; invalid_limits for a tenant's limits above the operator's.
	"concurrency_limited": {Kind: ErrUnavailable, Status: http.StatusTooManyRequests, RPC: RPCRefused, Retryable: true, RetryAfter: 250 * time.Millisecond},
	"invalid_limits":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"client_changed":      {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused, Retryable: true},

	// Upstream (vendor) answers; registry.UpstreamError carries these.
	"rate_limited":         {Kind: ErrUnavailable, Status: http.StatusTooManyRequests, RPC: RPCRefused, Retryable: true},
	"upstream_unavailable": {Kind: ErrUnavailable, Status: http.StatusBadGateway, RPC: RPCRefused, Retryable: true},
	// upstream_rejected passes the upstream's own 4xx status through
	// (Error.Status); without one it is a bad gateway.
	"upstream_rejected": {Kind: ErrInvalid, Status: http.StatusBadGateway, RPC: RPCRefused},
	"egress_refused":    {Kind: ErrUnavailable, Status: http.StatusBadGateway, RPC: RPCRefused},
	// cancelled: the caller cancelled a forwarded request (its
	// notifications/cancelled, or its HTTP request closed); the request
	// to the proxied server is cancelled too and the call audited with
	// this outcome. The caller is gone: the status (nginx's "client closed
	// request") is for logs and metrics.
	"cancelled": {Kind: ErrUnavailable, Status: 499, RPC: RPCRefused},

	// OAuth flows and token machinery.
	"invalid_state":              {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_connect_link":       {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"connect_link_other_user":    {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"connect_link_forbidden":     {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"signin_unavailable":         {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"not_oauth":                  {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"oauth_unavailable":          {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"token_request_failed":       {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true},
	"token_endpoint_unavailable": {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true},
	"provider_not_found":         {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"provider_not_configured":    {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"providers_unavailable":      {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true},
	"operators_unavailable":      {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"invalid_provider":           {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},

	// Tenant API keys and roles (admin API).
	"api_key_not_found":    {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"invalid_expiry":       {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"role_required":        {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"api_keys_unavailable": {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"members_unavailable":  {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"invalid_grants":       {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},

	// An instance's tools_mode (tools, meta, auto) and a tenant's
	// mcp_context_budget (tools/list bytes before auto serves meta-tools).
	"invalid_tools_mode":     {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_context_budget": {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},

	// Tenants, instances, callers (admin API).
	"tenant_not_found":      {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"instance_not_found":    {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"caller_not_found":      {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"tenant_exists":         {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused},
	"invalid_slug":          {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_name":          {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_agents":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_kind":          {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_agent_id":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_user_id":       {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"missing_property":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_base_url":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"revision_mismatch":     {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused},
	"undecryptable":         {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused},
	"invalid_field":         {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"undeclared_field":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"missing_field":         {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"own_settings_only":     {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"user_field":            {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"no_user_fields":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"unknown_connector":     {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"unsupported_auth_mode": {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_query":         {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_limit":         {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_before":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_cursor":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_time":          {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_retention":     {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_usage_by":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_id":            {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"test_unavailable":      {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"audit_unavailable":     {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true},
	"icon_not_found":        {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"verify_unavailable":    {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused},
	"verification_failed":   {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},

	// Members, invitations, sign-in links and sessions (package members).
	"member_not_found":     {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"member_exists":        {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused},
	"last_owner":           {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused},
	"invalid_email":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_role":         {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_lifetime":     {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invitation_not_found": {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"invalid_link":         {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused},
	"invalid_session":      {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused},
	"session_not_found":    {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"csrf_failed":          {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"switch_refused":       {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"invalid_identity":     {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"oidc_not_configured":  {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"oidc_failed":          {Kind: ErrUnauthorized, Status: http.StatusUnauthorized, RPC: RPCRefused},
	"oidc_unavailable":     {Kind: ErrUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCRefused, Retryable: true},
	"not_a_member":         {Kind: ErrForbidden, Status: http.StatusForbidden, RPC: RPCRefused},
	"tenant_required":      {Kind: ErrConflict, Status: http.StatusConflict, RPC: RPCRefused},

	// Catalog, connector packages and configuration (start-up and CLI).
	"connector_not_found": {Kind: ErrNotFound, Status: http.StatusNotFound, RPC: RPCRefused},
	"connector_invalid":   {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"connector_integrity": {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"connector_lint":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	// connector_app_invalid: a bad MCP Apps view declaration (apps[i].field).
	"connector_app_invalid": {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"catalog_invalid":       {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"catalog_signature":     {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"catalog_unsigned":      {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"catalog_url":           {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"external_reference":    {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_openapi":       {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_mapping":       {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"invalid_config":        {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
	"no_master_key":         {Kind: ErrInvalid, Status: http.StatusBadRequest, RPC: RPCRefused},
}

// Spec returns the table's entry for code; ok is false for a code that is
// not in the table (rendered as its kind's entry).
func Spec(code string) (CodeSpec, bool) {
	s, ok := errorCodes[code]
	return s, ok
}

// Codes returns every code of the table (in no order).
func Codes() []string {
	out := make([]string, 0, len(errorCodes))
	for c := range errorCodes {
		out = append(out, c)
	}
	return out
}

// KindOf returns the vocabulary kind of code, or nil for an internal or
// unknown code.
func KindOf(code string) error { return errorCodes[code].Kind }

// MaxMessage bounds the message of an error sent to a client.
const MaxMessage = 500

// ErrorDetail is the client-safe form of an error on every surface: a
// stable code, a bounded message that never holds a secret or an upstream
// body, and for retryable errors with a known delay that delay.
type ErrorDetail struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
	// ConnectURL is, for reconnect_required, a connect link the user
	// opens in a browser to connect again: short-lived and single-use;
	// for consent_required, the page where the user sets their own
	// values of the instance's user-scope fields.
	ConnectURL string `json:"connectUrl,omitempty"`
}

// ErrorBody is the JSON body of every error response and of every MCP
// tool error result: {"error": {...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// Typed is implemented by the typed errors of other packages (such as
// registry.UpstreamError) so that they render through the table like an
// *Error.
type Typed interface {
	error
	TypedError() *Error
}

// Problem is how one error is rendered: the table's entry for its code and
// its client-safe detail.
type Problem struct {
	// Status is the HTTP status.
	Status int
	// RPC is the JSON-RPC error code when the error refuses a request.
	RPC int
	// Retryable reports that the same request may succeed later.
	Retryable bool
	// Challenge asks for a caller credential (WWW-Authenticate: Bearer).
	Challenge bool
	// Internal reports a server fault outside the vocabulary: log it with
	// its cause; its text is never sent.
	Internal bool
	// Detail is the body's error object.
	Detail ErrorDetail
}

// ProblemOf renders err through the table. Errors outside the vocabulary
// are "internal" with a generic message; their text is never shown.
func ProblemOf(err error) Problem {
	e, ok := typedOf(err)
	code := CodeOf(err)
	spec, known := errorCodes[code]
	if !known {
		spec = errorCodes[kindCode(err)]
	}
	p := Problem{Status: spec.Status, RPC: spec.RPC, Retryable: spec.Retryable, Challenge: spec.Challenge,
		Internal: code == "internal", Detail: ErrorDetail{Code: code, Message: spec.Message}}
	if p.Internal {
		return p
	}
	retry := spec.RetryAfter
	if ok {
		if e.Message != "" {
			p.Detail.Message = BoundMessage(e.Message)
		}
		if e.Status != 0 {
			p.Status = e.Status
		}
		if e.RetryAfter > 0 {
			retry = e.RetryAfter
		}
		p.Detail.ConnectURL = e.ConnectURL
	}
	if p.Detail.Message == "" {
		p.Detail.Message = code
	}
	p.Detail.RetryAfterMs = retry.Milliseconds()
	return p
}

// DetailOf returns the client-safe detail of err (ProblemOf(err).Detail).
func DetailOf(err error) ErrorDetail { return ProblemOf(err).Detail }

// typedOf returns the *Error in err's chain or the *Error a Typed error in
// it renders as.
func typedOf(err error) (*Error, bool) {
	if e, ok := AsError(err); ok {
		return e, true
	}
	var t Typed
	if errors.As(err, &t) {
		if e := t.TypedError(); e != nil {
			return e, true
		}
	}
	return nil, false
}

// WriteError writes err as an ErrorBody with its status: the one HTTP error
// writer of the admin API, App mode and the OAuth pages, with the headers
// of SetHeaders.
func WriteError(w http.ResponseWriter, err error) {
	p := ProblemOf(err)
	p.SetHeaders(w.Header())
	w.WriteHeader(p.Status)
	b, _ := json.Marshal(ErrorBody{Error: p.Detail})
	w.Write(append(b, '\n'))
}

// SetHeaders sets the headers of an error response of p: a JSON content
// type, nosniff, WWW-Authenticate: Bearer for a refused caller credential
// (unless the handler set a richer challenge) and Retry-After (whole
// seconds, rounded up) for a known retry delay.
func (p Problem) SetHeaders(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if p.Status == http.StatusUnauthorized && p.Challenge && h.Get("WWW-Authenticate") == "" {
		h.Set("WWW-Authenticate", "Bearer")
	}
	if p.Detail.RetryAfterMs > 0 {
		h.Set("Retry-After", strconv.FormatInt((p.Detail.RetryAfterMs+999)/1000, 10))
	}
}

// BoundMessage cuts s to MaxMessage bytes on a rune boundary.
func BoundMessage(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	cut := MaxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
