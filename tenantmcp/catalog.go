package tenantmcp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

// Safety classes of an action, from its operation's annotations.
const (
	SafetyReadOnly    = "readOnly"
	SafetyWrite       = "write"
	SafetyDestructive = "destructive"
)

// safetyOf is the safety class of op.
func safetyOf(op *registry.Operation) string {
	a := op.Annotations()
	switch {
	case a.ReadOnly:
		return SafetyReadOnly
	case a.Destructive:
		return SafetyDestructive
	}
	return SafetyWrite
}

// Search bounds.
const (
	defaultLimit = 10
	maxLimit     = 50
	maxQuery     = 500
	maxSummary   = 160
)

// SearchArgs are the arguments of the search tool.
type SearchArgs struct {
	Query     string `json:"query"`
	Connector string `json:"connector,omitempty"`
	Instance  string `json:"instance,omitempty"`
	Safety    string `json:"safety,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	Cursor    string `json:"cursor,omitempty"`
	Grouped   bool   `json:"grouped,omitempty"`
	// GuideToken is the token the guide tool returned, if any: hits then
	// say whether a guide is still to be read.
	GuideToken string `json:"guideToken,omitempty"`
}

// SearchHit is one result: the address to describe or call.
type SearchHit struct {
	Address       string `json:"address"`
	Summary       string `json:"summary"`
	Safety        string `json:"safety"`
	GuideRequired bool   `json:"guideRequired"`
}

// SearchGroup is the hits of one instance, when grouped.
type SearchGroup struct {
	Instance  string      `json:"instance"`
	Connector string      `json:"connector"`
	Results   []SearchHit `json:"results"`
}

// Unavailable counts the instances the agent may call that could not be
// searched, and why. NotConnected are those of them the calling user
// must connect first (their own OAuth grant or user settings): each says
// where, in connectUrl.
type Unavailable struct {
	Count        int                   `json:"count"`
	NotConnected int                   `json:"notConnected"`
	Instances    []UnavailableInstance `json:"instances"`
}

// UnavailableInstance is one instance left out of a search: the code a
// call of it would answer now, and for a user not connected where they
// connect.
type UnavailableInstance struct {
	Instance   string `json:"instance"`
	Connector  string `json:"connector"`
	Code       string `json:"code"`
	ConnectURL string `json:"connectUrl,omitempty"`
}

// notConnected are the codes of an instance whose calling user has not
// connected it (or must connect it again): the user can act on them.
var notConnected = map[string]bool{"reconnect_required": true, "consent_required": true, "user_not_found": true}

// SearchResult is the search tool's answer.
type SearchResult struct {
	Results     []SearchHit   `json:"results,omitempty"`
	Groups      []SearchGroup `json:"groups,omitempty"`
	Total       int           `json:"total"`
	NextCursor  string        `json:"nextCursor,omitempty"`
	Unavailable *Unavailable  `json:"unavailable,omitempty"`
}

// scored is one hit across the tenant's instances.
type scored struct {
	address string
	target  *gateway.Target
	entity  *registry.Entity
	action  *registry.Action
	score   float64
	// named: the query names the hit's connector or instance.
	named bool
}

// catalog is the tenant endpoint's view of one agent's instances.
type catalog struct {
	targets     []*gateway.Target
	unavailable []gateway.Unreachable
	// connected, when set, says whether the calling user has what a call
	// of a target needs of them (gateway.Connected): search leaves out,
	// and counts, the instances they have not connected.
	connected func(context.Context, *gateway.Target) error
}

// searchable reports whether t's actions are indexed (an OpenAPI
// connector; the tools of hosted and local MCP servers are their
// instance endpoint's).
func searchable(t *gateway.Target) bool { return t.Connector.Spec != nil }

// search runs a query over the agent's instances.
func (s *Server) search(ctx context.Context, cat *catalog, args SearchArgs, guides readGuides) (*SearchResult, error) {
	if err := checkSearch(&args); err != nil {
		return nil, err
	}
	q := ParseQuery(args.Query)
	offset, err := decodeCursor(args.Cursor, cursorKey(args))
	if err != nil {
		return nil, err
	}
	res := &SearchResult{}
	matched := false
	var chosen []*gateway.Target
	var indexes []*Index
	var named []string // the ids, names and slugs of the instances q names
	var isNamed []bool // whether q names chosen[i]
	for _, t := range cat.targets {
		m := &t.Connector.Manifest
		if args.Connector != "" && strings.TrimPrefix(args.Connector, "connector:") != m.ID {
			continue
		}
		if args.Instance != "" && args.Instance != t.Instance.Slug {
			continue
		}
		matched = true
		if !searchable(t) {
			addUnavailable(res, t.Instance.Slug, m.ID, "not_indexed", "")
			continue
		}
		if cat.connected != nil {
			if err := cat.connected(ctx, t); err != nil {
				p := switchboard.ProblemOf(err)
				addUnavailable(res, t.Instance.Slug, m.ID, p.Detail.Code, p.Detail.ConnectURL)
				continue
			}
		}
		chosen = append(chosen, t)
		indexes = append(indexes, s.indexes.Of(t.Connector))
		n := q.Mentions(m.ID) || q.Mentions(m.Name) || q.Mentions(t.Instance.Slug)
		isNamed = append(isNamed, n)
		if n {
			named = append(named, m.ID, m.Name, t.Instance.Slug)
		}
	}
	scoring := q.Without(named...).Related(indexes)
	corpus := NewCorpus(scoring, indexes)
	filter := func(_ *registry.Entity, a *registry.Action) bool {
		return args.Safety != SafetyReadOnly || safetyOf(a.Op) == SafetyReadOnly
	}
	var hits []scored
	for i, t := range chosen {
		for _, h := range indexes[i].Search(scoring, corpus, filter) {
			hits = append(hits, scored{address: t.Instance.Slug + "." + h.Entity.Name + "." + h.Action.Name,
				target: t, entity: h.Entity, action: h.Action, score: h.Score, named: isNamed[i]})
		}
	}
	for _, u := range cat.unavailable {
		if (args.Instance == "" || args.Instance == u.Instance.Slug) &&
			(args.Connector == "" || strings.TrimPrefix(args.Connector, "connector:") == u.Instance.ConnectorID) {
			matched = true
			addUnavailable(res, u.Instance.Slug, u.Instance.ConnectorID, switchboard.CodeOf(u.Err), "")
		}
	}
	if !matched && (args.Connector != "" || args.Instance != "") {
		return nil, unknownConnector(cmpOr(args.Instance, args.Connector))
	}
	rank(hits)
	res.Total = len(hits)
	end := min(offset+args.Limit, len(hits))
	if offset > len(hits) {
		offset = len(hits)
	}
	page := hits[offset:end]
	if end < len(hits) {
		res.NextCursor = encodeCursor(end, cursorKey(args))
	}
	groupAt := map[string]int{}
	for _, h := range page {
		_ = h.action.Op.Load() // the schema's size decides schema_truncated
		hit := SearchHit{Address: h.address, Summary: summaryOf(h.action.Op), Safety: safetyOf(h.action.Op),
			GuideRequired: guideReason(h.target.Connector, h.action.Op, guides) != ""}
		if !args.Grouped {
			res.Results = append(res.Results, hit)
			continue
		}
		i, ok := groupAt[h.target.Instance.Slug]
		if !ok {
			i = len(res.Groups)
			groupAt[h.target.Instance.Slug] = i
			res.Groups = append(res.Groups, SearchGroup{Instance: h.target.Instance.Slug, Connector: h.target.Connector.Manifest.ID})
		}
		res.Groups[i].Results = append(res.Groups[i].Results, hit)
	}
	if res.Results == nil && res.Groups == nil {
		res.Results = []SearchHit{}
	}
	return res, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// addUnavailable counts an instance left out of a search, with the code
// of why and, for a user not connected, where they connect.
func addUnavailable(res *SearchResult, instance, connector, code, connectURL string) {
	if res.Unavailable == nil {
		res.Unavailable = &Unavailable{}
	}
	u := UnavailableInstance{Instance: instance, Connector: connector, Code: code}
	if notConnected[code] {
		res.Unavailable.NotConnected++
		u.ConnectURL = connectURL
	}
	res.Unavailable.Count++
	res.Unavailable.Instances = append(res.Unavailable.Instances, u)
}

// checkSearch validates and defaults a search's arguments.
func checkSearch(a *SearchArgs) error {
	a.Query = strings.TrimSpace(a.Query)
	switch {
	case a.Query == "":
		return invalid("search needs a non-empty \"query\": what you want to do, in your own words")
	case len(a.Query) > maxQuery:
		return invalid("the query is longer than %d bytes", maxQuery)
	case a.Safety != "" && a.Safety != SafetyReadOnly && a.Safety != "all":
		return invalid("\"safety\" must be %q or \"all\"", SafetyReadOnly)
	case a.Limit < 0 || a.Limit > maxLimit:
		return invalid("\"limit\" must be between 1 and %d", maxLimit)
	}
	if a.Limit == 0 {
		a.Limit = defaultLimit
	}
	return nil
}

func invalid(format string, args ...any) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_arguments", format, args...)
}

// unknownConnector is the refusal of an address, connector or instance
// the agent has not got.
func unknownConnector(name string) error {
	return switchboard.E(switchboard.ErrInvalid, "unknown_connector",
		"no connector or instance %q is installed in this workspace for this agent; search without a filter to see what is", clip(name, 64))
}

// summaryOf is an operation's one-line summary.
func summaryOf(op *registry.Operation) string {
	s := op.Summary
	if s == "" {
		s, _, _ = strings.Cut(op.Description, "\n")
		if i := strings.Index(s, ". "); i > 0 {
			s = s[:i+1]
		}
	}
	if s == "" {
		s = op.Method + " " + op.Path
	}
	return clip(strings.TrimSpace(s), maxSummary)
}

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// cursorKey ties a cursor to the search it pages.
func cursorKey(a SearchArgs) uint64 {
	h := sha256.Sum256([]byte(strings.Join([]string{a.Query, a.Connector, a.Instance, a.Safety}, "\x00")))
	return binary.BigEndian.Uint64(h[:8])
}

func encodeCursor(offset int, key uint64) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], key)
	binary.BigEndian.PutUint32(b[8:], uint32(offset))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeCursor(c string, key uint64) (int, error) {
	if c == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != 12 || binary.BigEndian.Uint64(b[:8]) != key {
		return 0, switchboard.E(switchboard.ErrInvalid, "invalid_cursor", "the cursor is not one this search returned; search again without it")
	}
	return int(binary.BigEndian.Uint32(b[8:])), nil
}

// address is a parsed instance.tool.action.
type address struct{ instance, tool, action string }

func parseAddress(s string) (address, error) {
	inst, rest, ok1 := strings.Cut(s, ".")
	i := strings.LastIndexByte(rest, '.')
	if !ok1 || i <= 0 || i == len(rest)-1 || inst == "" {
		return address{}, invalid("an address is instance.tool.action, as search returns it; got %q", clip(s, 80))
	}
	return address{instance: inst, tool: rest[:i], action: rest[i+1:]}, nil
}

// resolve finds an address among the agent's instances: the unknown ones
// are unknown_connector, an unknown tool or action unknown_tool.
func resolve(cat *catalog, addr address) (*gateway.Target, *registry.Entity, *registry.Action, error) {
	var t *gateway.Target
	for _, x := range cat.targets {
		if x.Instance.Slug == addr.instance {
			t = x
		}
	}
	if t == nil {
		for _, u := range cat.unavailable {
			if u.Instance.Slug == addr.instance {
				return nil, nil, nil, u.Err
			}
		}
		return nil, nil, nil, unknownConnector(addr.instance)
	}
	if !searchable(t) {
		return t, nil, nil, switchboard.E(switchboard.ErrNotFound, "unknown_tool",
			"the instance %s serves its own MCP tools: use its instance endpoint", t.Instance.Slug)
	}
	e, ok := t.Spec().Entity(addr.tool)
	if !ok {
		return t, nil, nil, switchboard.E(switchboard.ErrNotFound, "unknown_tool", "the instance %s has no tool %q", t.Instance.Slug, clip(addr.tool, 64))
	}
	a, ok := e.Action(addr.action)
	if !ok || a.Op == nil {
		return t, e, nil, switchboard.E(switchboard.ErrNotFound, "unknown_tool", "the tool %s.%s has no action %q", t.Instance.Slug, e.Name, clip(addr.action, 64))
	}
	return t, e, a, nil
}

// Describe bounds.
const (
	// MaxSchemaBytes bounds the input schema in a describe answer; a
	// larger one is shown one level deep, with truncated set.
	MaxSchemaBytes = 6 << 10
	maxDescription = 600
)

// DescribeArgs are the arguments of the describe tool.
type DescribeArgs struct {
	Address string `json:"address"`
}

// Description is the describe tool's answer.
type Description struct {
	Address     string          `json:"address"`
	Summary     string          `json:"summary"`
	Description string          `json:"description,omitempty"`
	Safety      string          `json:"safety"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Truncated   bool            `json:"truncated"`
	Required    []string        `json:"required"`
	OutputKeys  []string        `json:"outputKeys,omitempty"`
	Guide       *GuideSummary   `json:"guide,omitempty"`
	// View is the ui:// resource of the MCP Apps view declared on the
	// address's tool (resources/read of this endpoint answers it).
	View string `json:"view,omitempty"`
}

// GuideSummary is a connector guide as describe mentions it.
type GuideSummary struct {
	Connector string `json:"connector"`
	Summary   string `json:"summary"`
	Required  bool   `json:"required"`
}

// describe answers one address.
func (s *Server) describe(cat *catalog, args DescribeArgs) (*Description, error) {
	addr, err := parseAddress(args.Address)
	if err != nil {
		return nil, err
	}
	t, e, a, err := resolve(cat, addr)
	if err != nil {
		return nil, err
	}
	op := a.Op
	if err := op.Load(); err != nil {
		return nil, err
	}
	d := &Description{Address: args.Address, Summary: summaryOf(op), Safety: safetyOf(op), Required: []string{}}
	if op.Description != op.Summary {
		d.Description = clip(op.Description, maxDescription)
	}
	d.InputSchema, d.Truncated = boundedSchema(op, MaxSchemaBytes)
	if op.InputSchema != nil && op.InputSchema.Required != nil {
		d.Required = op.InputSchema.Required
	}
	if os := op.OutputSchema; os != nil {
		d.OutputKeys = sortedKeys(os.Properties)
	} else if os := e.OutputSchema; os != nil {
		d.OutputKeys = sortedKeys(os.Properties)
	}
	if g := parseGuide(t.Connector); g != nil {
		d.Guide = &GuideSummary{Connector: "connector:" + t.Connector.Manifest.ID, Summary: g.Summary, Required: g.Required}
	}
	for _, app := range t.Connector.Apps {
		if app.Tool == e.Name {
			d.View = app.URI
			break
		}
	}
	return d, nil
}

// boundedSchema is op's input schema when it fits limit bytes; else its
// top-level properties with their type and a cut description only, and
// truncated. A schema whose property list alone is too large keeps the
// required properties.
func boundedSchema(op *registry.Operation, limit int) (json.RawMessage, bool) {
	if op.InputSchema == nil {
		return json.RawMessage(`{"type":"object"}`), false
	}
	raw, _ := json.Marshal(op.InputSchema)
	if len(raw) <= limit {
		return raw, false
	}
	// A property keeps the constraints of a value (format, pattern,
	// lengths): an agent cannot guess an id's pattern from its name.
	type shallow struct {
		Type        any    `json:"type,omitempty"`
		Description string `json:"description,omitempty"`
		Enum        []any  `json:"enum,omitempty"`
		Format      string `json:"format,omitempty"`
		Pattern     string `json:"pattern,omitempty"`
		MinLength   *int   `json:"minLength,omitempty"`
		MaxLength   *int   `json:"maxLength,omitempty"`
	}
	props := map[string]shallow{}
	for name, p := range op.InputSchema.Properties {
		sh := shallow{Description: clip(p.Description, 80), Format: p.Format, Pattern: p.Pattern, MinLength: p.MinLength, MaxLength: p.MaxLength}
		if p.Type != "" {
			sh.Type = p.Type
		} else if len(p.Types) > 0 {
			sh.Type = p.Types
		}
		if len(p.Enum) <= 8 {
			sh.Enum = p.Enum
		}
		props[name] = sh
	}
	out, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": op.InputSchema.Required})
	if len(out) <= limit {
		return out, true
	}
	for name := range props {
		if !contains(op.InputSchema.Required, name) {
			delete(props, name)
		}
	}
	out, _ = json.Marshal(map[string]any{"type": "object", "properties": props, "required": op.InputSchema.Required})
	return out, true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	return keys
}

// CallArgs are the arguments of the call tool.
type CallArgs struct {
	Address    string          `json:"address"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	GuideToken string          `json:"guideToken,omitempty"`
}

// callArgs is the instance endpoint's arguments for the action: the
// caller's arguments with "action" set.
func callArgs(action string, raw json.RawMessage) (json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	if s := strings.TrimSpace(string(raw)); s != "" && s != "null" {
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return nil, invalid("\"arguments\" must be a JSON object of the action's arguments (see describe)")
		}
	}
	if _, ok := args["action"]; ok {
		return nil, invalid("\"arguments\" must not hold \"action\": the address names it")
	}
	args["action"], _ = json.Marshal(action)
	return json.Marshal(args)
}

// principalOf and the context keys carry the authenticated caller to the
// tool handlers.
type requestState struct {
	mu        sync.Mutex
	principal *auth.Principal
	log       gateway.CallLog
	surface   *gateway.Surface
	cat       *catalog
	err       error
	// instance is the instance of an instance endpoint serving the
	// meta-tools (ServeInstance); nil on the tenant endpoint.
	instance *gateway.Target
}

// catalogOf lists the agent's instances once per request.
func (s *Server) catalogOf(ctx context.Context, st *requestState) (*catalog, error) {
	if st.cat != nil || st.err != nil {
		return st.cat, st.err
	}
	ts, bad, err := s.g.AgentTargets(ctx, st.principal)
	if err != nil {
		st.err = err
		return nil, err
	}
	st.cat = &catalog{targets: ts, unavailable: bad, connected: s.connectedAs(st.principal)}
	return st.cat, nil
}

// connectedAs is the connection check of p's calls.
func (s *Server) connectedAs(p *auth.Principal) func(context.Context, *gateway.Target) error {
	return func(ctx context.Context, t *gateway.Target) error { return s.g.Connected(ctx, t, p) }
}
