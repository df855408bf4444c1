package registry

import (
	"net/http"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Connector is a loaded, verified connector package.
type Connector struct {
	Manifest Manifest
	// Spec is the compiled registry (type openapi); nil for other types.
	Spec *Spec
	// Guide is the agent-facing usage guide, if the package has one.
	Guide string
	// Files holds the bytes of the package's verified files by path, for
	// serving icons and docs.
	Files map[string][]byte
	// Apps are the connector's MCP Apps views, checked and compiled
	// (CompileApps).
	Apps []*App
}

// Spec is the entity -> action -> operation registry compiled from one
// OpenAPI description. It is immutable once compiled and safe for
// concurrent use.
type Spec struct {
	Title string
	// Servers are the description's server URLs, variables substituted
	// with their defaults.
	Servers []string
	// Entities are sorted by name. Each becomes one MCP tool.
	Entities []*Entity
	// Problems are operations left out of the registry, with the reason
	// (one bad operation never breaks the whole API).
	Problems []string

	entities map[string]*Entity
	ops      map[string]*Operation // by Name and by original ID

	toolsOnce sync.Once
	tools     []byte // the tools/list result document, built once
}

// Entity is a group of operations on one kind of thing (issues, pulls, ...).
// It becomes one MCP tool whose "action" argument selects the operation.
type Entity struct {
	// Name matches ^[a-zA-Z0-9_-]{1,64}$.
	Name        string
	Description string // ≤ 1024 characters
	Actions     []*Action
	// InputSchema is the tool's input schema: an object with an "action"
	// enum (the actions plus DescribeAction) and, when they fit the
	// context budget, the parameters of its actions; no $ref, items on
	// every array. When Compact is set it shows only "action" and
	// DescribeTarget: an action's own parameters are one DescribeAction
	// call away.
	InputSchema *jsonschema.Schema
	// Compact reports that InputSchema leaves the actions' parameters out.
	Compact bool
	// Annotations hold where all actions agree (see Annotations).
	Annotations Annotations
	// OutputSchema, when set, is the tool's output schema: an object
	// schema that the structured content of every successful call of
	// every action (DescribeAction included) validates against (see
	// EntityOutputSchema). Nil when some action's answer is not known.
	OutputSchema *jsonschema.Schema
}

// Annotations are behaviour hints derived from HTTP methods: GET and HEAD
// are read-only, DELETE is destructive, GET, HEAD, PUT and DELETE are
// idempotent. An entity's annotations say ReadOnly or Idempotent only when
// all its actions are, and Destructive when any action is.
type Annotations struct {
	ReadOnly    bool // every action is GET or HEAD
	Destructive bool // some action is DELETE
	Idempotent  bool // every action is GET, HEAD, PUT or DELETE
}

// Action is one operation as an entity's action.
type Action struct {
	// Name is the action's value in the "action" enum (such as "list").
	Name string
	Op   *Operation
}

// Operation is one upstream HTTP operation.
type Operation struct {
	// ID is the operationId as in the description (App mode addresses it).
	ID string
	// Name is a valid, unique tool-safe name derived from ID.
	Name        string
	Method      string
	Path        string // with {param} templates, possibly mid-segment
	Summary     string
	Description string
	Params      []Param
	Body        *Body
	// Deprecated reports that the description marks the operation
	// deprecated.
	Deprecated bool
	// Server overrides the API's server for this operation, if set.
	Server string
	// Security lists the credentials the operation accepts, as the
	// description's effective security requirement: alternatives, each
	// the names of the schemes (Auth.Schemes) that must all be sent; an
	// empty alternative accepts a call without credentials. Nil sends
	// the connector's credential.
	Security [][]string
	// Accept is the Accept header sent: the media types the operation's
	// answers declare, JSON first; "" sends application/json.
	Accept string
	// InputSchema is the object schema of this operation's arguments:
	// one property per parameter by name, plus "body" when it has one.
	InputSchema *jsonschema.Schema
	// OutputSchema, when set, is the schema of the structured content of
	// a successful call: the JSON answer when it is an object, else
	// {"result": answer}. It is permissive by construction (no required
	// properties, no closed objects, null allowed): upstream answers are
	// not ours to refuse. Nil when the description does not say what a
	// success looks like.
	OutputSchema *jsonschema.Schema

	resolved *jsonschema.Resolved
	// lazy, when set, holds the encoded schemas of an operation loaded
	// from the compiled form (see Compiled): InputSchema, the Params' and
	// the Body's Schema are filled by Load on first use, and OutputSchema
	// stays nil.
	lazy *lazySchemas
	// stringsOnly is set when InputSchema is an object whose properties
	// are all plain strings (stringsOnlySchema): then arguments that are
	// all strings are valid without asking the schema validator.
	stringsOnly bool
}

// Param is one path, query, header or cookie parameter.
type Param struct {
	// Name is the parameter's name on the wire.
	Name string
	// Arg, when set, is the argument that carries the parameter, because
	// Name is taken (the same name in two places, or "body" or "action").
	Arg      string
	In       string // path, query, header, cookie
	Required bool
	Style    string // OpenAPI style; empty means the default for In
	Explode  *bool
	// ContentType, when set, is the media type the value is serialised in
	// (a parameter described with "content", such as application/json).
	ContentType string
	Schema      *jsonschema.Schema
}

// Body is an operation's request body.
type Body struct {
	ContentType string
	Required    bool
	Schema      *jsonschema.Schema
	// Encoding holds the description's per-property encoding of a form or
	// multipart body, by top-level property name.
	Encoding map[string]Encoding
}

// Encoding is how one property of a form-urlencoded or multipart body is
// serialised (OpenAPI's Encoding Object). The zero value is the default:
// form style, exploded.
type Encoding struct {
	// Style is form, spaceDelimited, pipeDelimited or deepObject.
	Style   string
	Explode *bool
	// ContentType is the media type of the property's part or value, such
	// as application/json.
	ContentType string
}

// Applier injects upstream credentials into an outgoing request. The auth
// package implements it for each auth mode; the registry never sees a
// credential value.
type Applier interface {
	Apply(req *http.Request) error
}

// OperationApplier is an Applier that chooses the credential by the
// operation it is sent to (Operation.Security); BuildRequest calls
// ApplyOperation instead of Apply.
type OperationApplier interface {
	Applier
	ApplyOperation(op *Operation, req *http.Request) error
}

// ArgName is the name of the argument that carries the parameter.
func (p Param) ArgName() string {
	if p.Arg != "" {
		return p.Arg
	}
	return p.Name
}
