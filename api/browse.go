package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// The catalog browse API: GET /v1/connectors (list and search),
// GET /v1/connectors/{connector} (detail in the requested language) and
// GET /v1/connectors/{connector}/icons/{size}.

// defaultLanguage is the language of a manifest's own texts.
const defaultLanguage = "en"

// ConnectorField is a connector's field as the catalog shows it. Secret
// fields never show a default or an example.
type ConnectorField struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
	Secret      bool   `json:"secret"`
	Default     string `json:"default,omitempty"`
	Example     string `json:"example,omitempty"`
}

// ConnectorAuth is how a connector authenticates, for badges and the
// install form: the manifest's auth type, the OAuth provider and scopes,
// and the auth modes an instance may choose.
type ConnectorAuth struct {
	Type     string   `json:"type"`
	Provider string   `json:"provider,omitempty"`
	Scopes   []string `json:"scopes"`
	Modes    []string `json:"modes"`
}

// ConnectorIcons are the URLs of a connector's icons, relative to the API
// root; empty when the connector has none.
type ConnectorIcons struct {
	Small string `json:"small,omitempty"`
	Large string `json:"large,omitempty"`
}

// ConnectorSummary is a catalog entry as GET /v1/connectors lists it, in
// the requested language.
type ConnectorSummary struct {
	ID          string           `json:"id"`
	Name        string           `json:"name"`
	Version     string           `json:"version"`
	Type        string           `json:"type"`
	Scope       string           `json:"scope,omitempty"`
	AuthModes   []string         `json:"auth_modes"`
	Auth        ConnectorAuth    `json:"auth"`
	Fields      []ConnectorField `json:"fields"`
	Tags        []string         `json:"tags"`
	Requires    []string         `json:"requires"`
	Description string           `json:"description,omitempty"`
	Icons       ConnectorIcons   `json:"icons"`
	// Language is the language of Name and Description.
	Language string `json:"language"`
}

// ConnectorEntity is one entity (MCP tool) of a connector and its actions.
type ConnectorEntity struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Actions     []string `json:"actions"`
}

// ConnectorDetail is GET /v1/connectors/{connector}.
type ConnectorDetail struct {
	ConnectorSummary
	// Languages are the languages the connector's texts exist in.
	Languages      []string `json:"languages"`
	LLMDescription string   `json:"llm_description,omitempty"`
	DocsURL        string   `json:"docs_url,omitempty"`
	Guide          string   `json:"guide,omitempty"`
	// FormSchema is the JSON Schema (2020-12) of the install form: one
	// string property per env[] field; secret fields are writeOnly and
	// show no default or example.
	FormSchema map[string]any `json:"form_schema"`
	// Verification is how an instance's configuration is tested before it
	// is saved: probe, command, or none (activated without a test).
	Verification string            `json:"verification"`
	Entities     []ConnectorEntity `json:"entities"`
}

// texts returns the connector's name, description, LLM description and
// guide in lang, falling back member by member to the English ones.
func texts(conn *registry.Connector, lang string) (name, desc, llm, guide string) {
	m := &conn.Manifest
	name, desc, llm, guide = m.Name, m.Description, m.Docs.LLMShortDescription, conn.Guide
	t, ok := m.Docs.Translations[lang]
	if !ok {
		return
	}
	if t.Name != "" {
		name = t.Name
	}
	if t.UserDescription != "" {
		desc = t.UserDescription
	}
	if t.LLMShortDescription != "" {
		llm = t.LLMShortDescription
	}
	if b, ok := conn.Files[t.Guide]; ok && t.Guide != "" {
		guide = string(b)
	}
	return
}

// languages lists the languages of a connector: English first, then its
// translations sorted.
func languages(m *registry.Manifest) []string {
	out := []string{defaultLanguage}
	for l := range m.Docs.Translations {
		if l != defaultLanguage {
			out = append(out, l)
		}
	}
	slices.Sort(out[1:])
	return out
}

// negotiate picks the language to answer in: ?lang= when the connector has
// it (or its primary subtag), else the best Accept-Language match, else
// English. It is case-insensitive.
func negotiate(c echo.Context, have []string) string {
	match := func(tag string) (string, bool) {
		tag = strings.TrimSpace(tag)
		for _, h := range have {
			if strings.EqualFold(h, tag) {
				return h, true
			}
		}
		if primary, _, ok := strings.Cut(tag, "-"); ok {
			for _, h := range have {
				if strings.EqualFold(h, primary) {
					return h, true
				}
			}
		}
		return "", false
	}
	if q := c.QueryParam("lang"); q != "" {
		if l, ok := match(q); ok {
			return l
		}
		return defaultLanguage
	}
	best, bestQ := defaultLanguage, -1.0
	for _, part := range strings.Split(c.Request().Header.Get("Accept-Language"), ",") {
		tag, params, _ := strings.Cut(part, ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			q = f
		}
		if l, ok := match(tag); ok && q > 0 && q > bestQ {
			best, bestQ = l, q
		}
	}
	return best
}

func summarize(conn *registry.Connector, lang string) ConnectorSummary {
	m := &conn.Manifest
	name, desc, _, _ := texts(conn, lang)
	out := ConnectorSummary{
		ID: m.ID, Name: name, Version: m.Version, Type: m.Type, Scope: m.Scope,
		AuthModes: append([]string{}, m.Auth.Modes...), Tags: append([]string{}, m.Tags...),
		Requires: append([]string{}, m.Requires...),
		Auth: ConnectorAuth{Type: m.Auth.Type, Provider: m.Auth.Provider,
			Scopes: append([]string{}, m.Auth.Scopes...), Modes: append([]string{}, m.Auth.Modes...)},
		Fields: []ConnectorField{}, Description: desc, Language: lang,
	}
	for _, f := range m.Env {
		cf := ConnectorField{Name: f.Name, Label: f.Label, Description: f.Description, Required: f.Required, Secret: f.Secret}
		if !f.Secret {
			cf.Default, cf.Example = f.Default, f.Example
		}
		out.Fields = append(out.Fields, cf)
	}
	if m.Icons.Small != "" {
		out.Icons.Small = "/v1/connectors/" + m.ID + "/icons/small"
	}
	if m.Icons.Large != "" {
		out.Icons.Large = "/v1/connectors/" + m.ID + "/icons/large"
	}
	return out
}

// formSchema is the JSON Schema of a connector's install form.
func formSchema(m *registry.Manifest) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, f := range m.Env {
		p := map[string]any{"type": "string", "title": f.Label}
		if f.Description != "" {
			p["description"] = f.Description
		}
		if f.Secret {
			p["writeOnly"] = true
			p["format"] = "password"
		} else {
			if f.Default != "" {
				p["default"] = f.Default
			}
			if f.Example != "" {
				p["examples"] = []string{f.Example}
			}
		}
		if f.Required {
			required = append(required, f.Name)
			p["minLength"] = 1
		}
		props[f.Name] = p
	}
	return map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
}

// connectorQuery is the search of GET /v1/connectors.
type connectorQuery struct {
	text     string
	tags     []string
	types    []string
	requires []string
}

func parseConnectorQuery(c echo.Context) (connectorQuery, error) {
	q := c.QueryParams()
	split := func(name string) []string {
		var out []string
		for _, v := range q[name] {
			for _, x := range strings.Split(v, ",") {
				if x = strings.TrimSpace(x); x != "" {
					out = append(out, x)
				}
			}
		}
		return out
	}
	out := connectorQuery{text: strings.ToLower(strings.TrimSpace(q.Get("q"))), tags: split("tag"), types: split("type"), requires: split("requires")}
	if len(out.text) > 200 {
		return out, switchboard.E(switchboard.ErrInvalid, "invalid_query", "q is longer than 200 characters")
	}
	for _, t := range out.types {
		if t != registry.TypeOpenAPI && t != registry.TypeMCPRemote && t != registry.TypeMCPLocal {
			return out, switchboard.E(switchboard.ErrInvalid, "invalid_query", "type %q is not openapi, mcp_remote or mcp_local", truncate(t, 40))
		}
	}
	return out, nil
}

// matches reports whether a connector matches the search: the text in its
// id, name, description, LLM description or tags (in lang or English);
// every tag and every requirement given; one of the types given.
func (q connectorQuery) matches(conn *registry.Connector, lang string) bool {
	m := &conn.Manifest
	if len(q.types) > 0 && !slices.Contains(q.types, m.Type) {
		return false
	}
	for _, t := range q.tags {
		if !slices.ContainsFunc(m.Tags, func(x string) bool { return strings.EqualFold(x, t) }) {
			return false
		}
	}
	for _, r := range q.requires {
		if !slices.ContainsFunc(m.Requires, func(x string) bool { return strings.EqualFold(x, r) }) {
			return false
		}
	}
	if q.text == "" {
		return true
	}
	name, desc, llm, _ := texts(conn, lang)
	hay := []string{m.ID, m.Name, m.Description, m.Docs.LLMShortDescription, name, desc, llm}
	hay = append(hay, m.Tags...)
	for _, h := range hay {
		if strings.Contains(strings.ToLower(h), q.text) {
			return true
		}
	}
	return false
}

// catalogLanguages lists every language of the catalog's connectors.
func catalogLanguages(list []*registry.Connector) []string {
	var out []string
	for _, conn := range list {
		for _, l := range languages(&conn.Manifest) {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out
}

func (s *Server) listConnectors(c echo.Context) error {
	q, err := parseConnectorQuery(c)
	if err != nil {
		return err
	}
	out := []ConnectorSummary{}
	var list []*registry.Connector
	if s.cfg.Catalog != nil {
		list = s.cfg.Catalog.List()
	}
	lang := negotiate(c, catalogLanguages(list))
	for _, conn := range list {
		l := lang
		if !slices.Contains(languages(&conn.Manifest), l) {
			l = defaultLanguage
		}
		if q.matches(conn, l) {
			out = append(out, summarize(conn, l))
		}
	}
	c.Response().Header().Add("Vary", "Accept-Language")
	return c.JSON(http.StatusOK, map[string]any{"connectors": out})
}

// connector returns the catalog's connector named by the path, or a
// not-found error.
func (s *Server) connector(c echo.Context) (*registry.Connector, error) {
	id := c.Param("connector")
	if s.cfg.Catalog != nil {
		if conn, ok := s.cfg.Catalog.Connector(id); ok {
			return conn, nil
		}
	}
	return nil, switchboard.E(switchboard.ErrNotFound, "connector_not_found", "connector %q is not in the catalog", truncate(id, 64))
}

func (s *Server) getConnector(c echo.Context) error {
	conn, err := s.connector(c)
	if err != nil {
		return err
	}
	m := &conn.Manifest
	langs := languages(m)
	lang := negotiate(c, langs)
	_, _, llm, guide := texts(conn, lang)
	out := ConnectorDetail{
		ConnectorSummary: summarize(conn, lang),
		Languages:        langs,
		LLMDescription:   llm,
		DocsURL:          m.Docs.URL,
		Guide:            guide,
		FormSchema:       formSchema(m),
		Verification:     "none",
		Entities:         []ConnectorEntity{},
	}
	switch {
	case m.Verify == nil:
	case m.Verify.Probe != nil:
		out.Verification = "probe"
	case len(m.Verify.Command) > 0:
		out.Verification = "command"
	}
	if conn.Spec != nil {
		for _, e := range conn.Spec.Entities {
			ce := ConnectorEntity{Name: e.Name, Description: e.Description, Actions: []string{}}
			for _, a := range e.Actions {
				ce.Actions = append(ce.Actions, a.Name)
			}
			out.Entities = append(out.Entities, ce)
		}
	}
	c.Response().Header().Set("Content-Language", lang)
	c.Response().Header().Add("Vary", "Accept-Language")
	return c.JSON(http.StatusOK, out)
}

// getConnectorIcon serves a connector's icon with its content type. SVG
// is served under a policy that runs no script, and never sniffed.
func (s *Server) getConnectorIcon(c echo.Context) error {
	conn, err := s.connector(c)
	if err != nil {
		return err
	}
	var p string
	switch c.Param("size") {
	case "small":
		p = conn.Manifest.Icons.Small
	case "large":
		p = conn.Manifest.Icons.Large
	default:
		return switchboard.E(switchboard.ErrNotFound, "icon_not_found", "icon size must be small or large")
	}
	b, ok := conn.Files[p]
	ct := registry.IconContentType(p)
	if p == "" || !ok || ct == "" {
		return switchboard.E(switchboard.ErrNotFound, "icon_not_found", "connector %q has no %s icon", conn.Manifest.ID, c.Param("size"))
	}
	h := c.Response().Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	if e, ok := s.cfg.Catalog.Entry(conn.Manifest.ID); ok {
		for _, f := range e.Files {
			if f.Path == p {
				etag := `"` + f.SHA256 + `"`
				h.Set("ETag", etag)
				if c.Request().Header.Get("If-None-Match") == etag {
					return c.NoContent(http.StatusNotModified)
				}
			}
		}
	}
	return c.Blob(http.StatusOK, ct, b)
}
