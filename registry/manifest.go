package registry

import (
	"bytes"
	"encoding/json"
)

// Connector types.
const (
	TypeOpenAPI   = "openapi"
	TypeMCPRemote = "mcp_remote"
	TypeMCPLocal  = "mcp_local"
)

// Auth modes an app instance may use. A connector lists the ones it supports
// in Auth.Modes.
const (
	ModeAPIKey            = "apiKey"
	ModeAccessToken       = "accessToken"
	ModeClientCredentials = "clientCredentials"
	ModeOAuth             = "oauth"
	ModeOAuthCentral      = "oauthCentral"
	ModeJWT               = "jwt"
)

// Manifest is a connector's connector.json.
type Manifest struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Type        string   `json:"type"`
	Scope       string   `json:"scope"`
	Requires    []string `json:"requires,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Description string   `json:"user_description,omitempty"`
	Auth        Auth     `json:"auth"`
	Docs        Docs     `json:"docs,omitempty"`
	Env         []Field  `json:"env,omitempty"`
	Icons       Icons    `json:"icons,omitempty"`

	// OpenAPI is the path, inside the connector folder, of the vendor's
	// OpenAPI description (type openapi).
	OpenAPI string `json:"openapi,omitempty"`
	// Mapping is the path of the entity mapping file, if any.
	Mapping string `json:"mapping,omitempty"`
	// BaseURL is the upstream base URL. It may hold {ENV:NAME} placeholders
	// filled from the instance's fields, so that the URL itself is a row of
	// the instance, never code. Empty means the description's first server.
	BaseURL string `json:"base_url,omitempty"`
	// PropagateTrace lets the upstream requests of the connector's calls
	// carry the call's W3C traceparent when tracing is on. Off by default:
	// a trace id sent to a third party tells it which calls belong
	// together.
	PropagateTrace bool `json:"propagate_trace,omitempty"`
	// Servers are where the operations that name an absolute server of
	// their own (file uploads, OAuth endpoints, regional hosts) are sent:
	// by that server's URL in the description (its variables at their
	// defaults, as Operation.Server holds it), a URL template whose
	// {ENV:NAME} placeholders are filled from the instance's fields (see
	// ServerURLs). A server not listed is called at its own URL.
	Servers map[string]string `json:"servers,omitempty"`

	// Verify is how an instance's configuration is tested before it is
	// saved; nil means instances are activated without a test.
	Verify *Verify `json:"verify,omitempty"`
	// MCPConfig says how to reach the connector's MCP server (types
	// mcp_remote and mcp_local).
	MCPConfig *MCPConfig `json:"mcp_config,omitempty"`
	// Apps are the connector's MCP Apps views (see apps.go).
	Apps []AppDecl `json:"apps,omitempty"`
}

// Verify is a connector's verification: either a declarative Probe (type
// openapi) or a Command run as a subprocess in the connector's folder.
type Verify struct {
	// Command is the argv of the verification program, each element
	// subject to placeholder substitution. It is run without a shell.
	Command []string `json:"command,omitempty"`
	// TimeoutSecs bounds the verification; 0 means DefaultVerifyTimeout.
	TimeoutSecs int `json:"timeout_secs,omitempty"`
	// Probe is a declarative test: one operation and the status class it
	// must answer with.
	Probe *Probe `json:"probe,omitempty"`
}

// DefaultVerifyTimeout is the verification timeout, in seconds, when the
// manifest sets none.
const DefaultVerifyTimeout = 15

// Probe is a declarative verification: call Operation (an operationId or
// an "entity.action" of the registry) and expect a status of class
// Expect ("2xx" when empty).
type Probe struct {
	Operation string `json:"operation"`
	Expect    string `json:"expect,omitempty"`
	// Args are the operation's arguments, string-valued; they may hold
	// placeholders.
	Args map[string]string `json:"args,omitempty"`
}

// MCPConfig says how an MCP connector is reached. Every string may hold
// {ENV:NAME} and {SECRET:NAME} placeholders.
type MCPConfig struct {
	// URL is the Streamable HTTP endpoint of a hosted server (mcp_remote).
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to URL (mcp_remote).
	Headers map[string]string `json:"headers,omitempty"`
	// Command is the argv of a stdio server (mcp_local).
	Command []string `json:"command,omitempty"`
	// Env is the environment of the stdio server (mcp_local).
	Env map[string]string `json:"env,omitempty"`
}

// Field is one value an app instance of the connector is configured with.
// Every field value is stored as its own encrypted row; Secret fields are
// write-only through every API.
type Field struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Secret      bool   `json:"secret,omitempty"`
	Default     string `json:"default,omitempty"`
	Example     string `json:"example,omitempty"`
	// Scope says whose value the field holds: "global" (the instance's,
	// set by an admin at install) or "user" (each user's own, set by the
	// member themself and stored per tenant, instance and user). Empty
	// inherits the manifest's scope.
	Scope string `json:"scope,omitempty"`
}

// Field scopes (Field.Scope and Manifest.Scope).
const (
	ScopeGlobal = "global"
	ScopeUser   = "user"
)

// UserField reports whether f holds each user's own value: it is marked
// scope user, or it inherits the user scope of the connector.
func (m *Manifest) UserField(f Field) bool {
	if f.Scope != "" {
		return f.Scope == ScopeUser
	}
	return m.Scope == ScopeUser
}

// UserFields returns the fields whose values are per user (UserField).
func (m *Manifest) UserFields() []Field {
	var out []Field
	for _, f := range m.Env {
		if m.UserField(f) {
			out = append(out, f)
		}
	}
	return out
}

// Auth says how the connector authenticates to the vendor.
type Auth struct {
	// Type is the manifest's auth summary: api_key, oauth2, password or none.
	Type string `json:"type"`
	// Modes lists the auth modes (ModeAPIKey, ...) an instance may choose.
	Modes []string `json:"modes"`
	// Delivery is where an API key or token goes: header, query or cookie.
	Delivery string `json:"delivery,omitempty"`
	// Param is the header, query parameter or cookie name.
	Param string `json:"param,omitempty"`
	// Format renders the delivered value; {SECRET:NAME} is replaced by the
	// field NAME. Empty means the bare value of Field.
	Format string `json:"format,omitempty"`
	// Field names the env field that holds the API key (mode apiKey).
	Field string `json:"field,omitempty"`
	// TokenField names the env field that holds a ready bearer token (mode
	// accessToken). Delivered as "Authorization: Bearer <token>".
	TokenField string `json:"token_field,omitempty"`
	// Provider is the platform OAuth provider slug (modes oauth, oauthCentral).
	Provider string `json:"provider,omitempty"`
	// Scopes are the OAuth scopes the connector needs.
	Scopes []string `json:"scopes,omitempty"`
	// Deliver is how an oauth2 token reaches the MCP server an
	// mcp_local connector runs: "env" or "file" (the short form), or a
	// Delivery object.
	Deliver *Delivery `json:"deliver,omitempty"`
	// TokenAuthMethod is how the client authenticates at the token
	// endpoint in mode jwt (RFC 7523 §3.1): client_secret_basic,
	// client_secret_post or none. Empty: client_secret_basic when the
	// instance has a client secret, else none.
	TokenAuthMethod string `json:"token_auth_method,omitempty"`
	// Schemes are the security schemes of an openapi connector whose
	// operations do not all accept the same credential: each operation
	// names the schemes it accepts (Operation.Security) and is sent the
	// credential of one of its alternatives the instance holds. Empty
	// sends every operation the mode's credential.
	Schemes []Scheme `json:"schemes,omitempty"`
}

// Scheme is one of the description's security schemes and how its
// credential is sent.
type Scheme struct {
	// Name is the scheme's name in the description.
	Name string `json:"name"`
	// Kind is SchemeAPIKey, SchemeBasic, SchemeBearer or SchemeOAuth2.
	// An oauth2 scheme is sent the instance's bearer token (the token
	// modes, or the token field in mode apiKey); a bearer scheme too, or
	// its Field.
	Kind string `json:"kind"`
	// Delivery is header, query or cookie; Param the header, query
	// parameter or cookie name (not for oauth2).
	Delivery string `json:"delivery,omitempty"`
	Param    string `json:"param,omitempty"`
	// Format renders the value ({SECRET:NAME} placeholders); empty sends
	// Field's value as it is.
	Format string `json:"format,omitempty"`
	// Field is the secret env field holding the credential.
	Field string `json:"field,omitempty"`
}

// Scheme kinds.
const (
	SchemeAPIKey = "api_key"
	SchemeBasic  = "basic"
	SchemeBearer = "bearer"
	SchemeOAuth2 = "oauth2"
)

// Delivery is how an mcp_local connector's server receives the OAuth
// token of the call's user (or of the instance): in an environment
// variable or in a file of its private directory (removed when it
// exits), in one of the formats DeliveryFormats. The host mints or
// refreshes the token with its token machinery and starts a new process
// before the token it gave expires. A token never appears in argv.
type Delivery struct {
	// As is "env" or "file".
	As string `json:"as"`
	// Format is access_token (the default: the bare access token),
	// refresh_token (the bare refresh token; the server refreshes it with
	// the client id and secret in <ENV>_CLIENT_ID and <ENV>_CLIENT_SECRET,
	// or in the files <path>.client_id and <path>.client_secret), or
	// google_authorized_user (the JSON of Google's authorized-user
	// credentials: type, client_id, client_secret, refresh_token).
	Format string `json:"format,omitempty"`
	// Env is the variable (As env); default ACCESS_TOKEN.
	Env string `json:"env,omitempty"`
	// Path is the file's path relative to the private directory (As
	// file); default token. The server finds the directory in
	// MCP_WORK_DIR (its working directory too).
	Path string `json:"path,omitempty"`
}

// Delivery formats.
const (
	DeliverAccessToken          = "access_token"
	DeliverRefreshToken         = "refresh_token"
	DeliverGoogleAuthorizedUser = "google_authorized_user"
)

// DeliveryFormats are the formats a Delivery may name.
var DeliveryFormats = []string{DeliverAccessToken, DeliverRefreshToken, DeliverGoogleAuthorizedUser}

// UnmarshalJSON reads the short form "env" or "file" as well as the
// object.
func (d *Delivery) UnmarshalJSON(b []byte) error {
	var as string
	if json.Unmarshal(b, &as) == nil {
		*d = Delivery{As: as}
		return nil
	}
	type plain Delivery
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*d = Delivery(p)
	return nil
}

// Docs are the connector's human and agent-facing texts.
type Docs struct {
	// LLMShortDescription is a one-paragraph description for agents.
	LLMShortDescription string `json:"llm_short_description,omitempty"`
	// Guide is the path of the agent-facing usage guide (Markdown).
	Guide string `json:"guide,omitempty"`
	// GuideRequired marks the guide as one an agent must read before it
	// calls any of the connector's actions through the tenant catalog
	// endpoint (a guide_required refusal until it has).
	GuideRequired bool `json:"guide_required,omitempty"`
	// URL is the vendor's API documentation.
	URL string `json:"url,omitempty"`
	// SearchKeywords are words users say for a tool (entity) that its
	// operations' text does not use, by tool name: {"conversations":
	// ["channel", "direct message"]} when the API says conversation and
	// its users say channel. The tenant catalog endpoint's search indexes
	// them with each action of the tool. For the connector's author, who
	// knows its users' words: the search itself has no vendor vocabulary.
	// A tool the connector has not is ignored, and so are the words past
	// the first 32 of a tool and any longer than 64 bytes.
	SearchKeywords map[string][]string `json:"search_keywords,omitempty"`
	// Translations are the texts in other languages, by BCP 47 language
	// tag (such as "de" or "pt-BR"). The texts above are in English.
	Translations map[string]DocsText `json:"translations,omitempty"`
}

// DocsText is a connector's texts in one language. Empty members fall
// back to the English ones.
type DocsText struct {
	Name                string `json:"name,omitempty"`
	UserDescription     string `json:"user_description,omitempty"`
	LLMShortDescription string `json:"llm_short_description,omitempty"`
	// Guide is the path of the guide in this language.
	Guide string `json:"guide,omitempty"`
}

// Icons are paths, inside the connector folder, of the connector's icons.
type Icons struct {
	Small string `json:"small,omitempty"`
	Large string `json:"large,omitempty"`
}

// Field returns the env field with the given name.
func (m *Manifest) Field(name string) (Field, bool) {
	for _, f := range m.Env {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// SupportsMode reports whether the connector allows the auth mode.
func (m *Manifest) SupportsMode(mode string) bool {
	for _, x := range m.Auth.Modes {
		if x == mode {
			return true
		}
	}
	return false
}
