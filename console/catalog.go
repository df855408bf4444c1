package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
	"golang.org/x/text/language"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// catalogData is the catalog page: the connectors that match the
// filters, and every tag and type to filter by.
type catalogData struct {
	Query, Tag, Type string
	Tags, Types      []string
	Connectors       []connectorCard
	// Total is the number of connectors in the catalog, filtered or not.
	Total int
}

func (catalogData) title() string { return "Catalog" }

// Filtered reports whether any filter is set.
func (d catalogData) Filtered() bool { return d.Query != "" || d.Tag != "" || d.Type != "" }

// connectorCard is one connector in the catalog list.
type connectorCard struct {
	ID, Name, Type, Description string
	Tags                        []string
	Modes                       []string
	HasIcon                     bool
}

// typeLabels name the connector types for people.
var typeLabels = map[string]string{
	registry.TypeOpenAPI:   "REST API",
	registry.TypeMCPRemote: "Hosted MCP server",
	registry.TypeMCPLocal:  "Local MCP server",
}

// modeLabels name the auth modes for people.
var modeLabels = map[string]string{
	registry.ModeOAuthCentral:      "Platform OAuth",
	registry.ModeOAuth:             "Your own OAuth client",
	registry.ModeAPIKey:            "API key",
	registry.ModeAccessToken:       "Access token",
	registry.ModeClientCredentials: "Client credentials",
	registry.ModeJWT:               "JWT bearer",
}

// maxQuery bounds the search text and filter values read from the URL.
const maxQuery = 200

// catalogList renders the catalog, filtered by the query parameters q
// (words that must all appear in the name, id, description or tags),
// tag and type.
func (c *Console) catalogList(ec echo.Context, v *Viewer) error {
	q := ec.Request().URL.Query()
	d := catalogData{
		Query: clipText(strings.TrimSpace(q.Get("q"))),
		Tag:   clipText(q.Get("tag")),
		Type:  clipText(q.Get("type")),
	}
	tags, types := map[string]bool{}, map[string]bool{}
	words := strings.Fields(strings.ToLower(d.Query))
	for _, x := range c.cfg.Catalog.List() {
		m := &x.Manifest
		d.Total++
		types[m.Type] = true
		for _, t := range m.Tags {
			tags[t] = true
		}
		if d.Tag != "" && !slices.Contains(m.Tags, d.Tag) || d.Type != "" && m.Type != d.Type || !matches(m, words) {
			continue
		}
		d.Connectors = append(d.Connectors, connectorCard{
			ID: m.ID, Name: m.Name, Type: m.Type, Description: m.Description,
			Tags: m.Tags, Modes: m.Auth.Modes, HasIcon: m.Icons.Small != "",
		})
	}
	d.Tags, d.Types = sortedKeys(tags), sortedKeys(types)
	c.render(ec, http.StatusOK, "catalog", v, d)
	return nil
}

// matches reports whether every word appears in the connector's id,
// name, description or tags.
func matches(m *registry.Manifest, words []string) bool {
	text := strings.ToLower(strings.Join(append([]string{m.ID, m.Name, m.Description}, m.Tags...), " "))
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// clipText bounds a value read from the URL.
func clipText(s string) string {
	if len(s) > maxQuery {
		s = strings.ToValidUTF8(s[:maxQuery], "")
	}
	return s
}

// connectorData is a connector's docs page.
type connectorData struct {
	ID, Name, Type, Version, Description, DocsURL string
	// Lang is the language the texts are in (BCP 47).
	Lang     string
	Tags     []string
	Modes    []string
	Fields   []registry.Field
	Scopes   []string
	Guide    template.HTML
	HasIcon  bool
	Entities []entityRow
}

func (d connectorData) title() string { return d.Name }

// entityRow is one tool of an OpenAPI connector and its actions.
type entityRow struct {
	Name    string
	Actions []string
}

// connectorPage renders a connector's documentation: description, auth
// modes, fields, the tools it offers and its usage guide, in the
// browser's language when the connector has a translation.
func (c *Console) connectorPage(ec echo.Context, v *Viewer) error {
	x, err := c.connector(ec)
	if err != nil {
		return err
	}
	m := &x.Manifest
	d := connectorData{
		ID: m.ID, Name: m.Name, Type: m.Type, Version: m.Version, Description: m.Description, Lang: "en",
		Tags: m.Tags, Modes: m.Auth.Modes, Fields: m.Env, Scopes: m.Auth.Scopes, HasIcon: m.Icons.Large != "" || m.Icons.Small != "",
	}
	if u, err := url.Parse(m.Docs.URL); err == nil && (u.Scheme == "https" || u.Scheme == "http") {
		d.DocsURL = m.Docs.URL
	}
	guide := x.Guide
	if tag, text, ok := translation(m.Docs.Translations, ec.Request().Header.Get("Accept-Language")); ok {
		d.Lang = tag
		if text.Name != "" {
			d.Name = text.Name
		}
		if text.UserDescription != "" {
			d.Description = text.UserDescription
		}
		if b, ok := x.Files[text.Guide]; ok && text.Guide != "" {
			guide = string(b)
		}
	}
	if guide != "" {
		var buf bytes.Buffer
		// goldmark leaves raw HTML out and drops javascript: links unless
		// told otherwise (html.WithUnsafe): the guide renders as text,
		// tables and links only.
		if err := guideMarkdown.Convert([]byte(guide), &buf); err != nil {
			return fmt.Errorf("rendering the usage guide of %s: %w", m.ID, err)
		}
		d.Guide = template.HTML(buf.String()) // #nosec: goldmark output without raw HTML
	}
	if x.Spec != nil {
		for _, e := range x.Spec.Entities {
			row := entityRow{Name: e.Name}
			for _, a := range e.Actions {
				row.Actions = append(row.Actions, a.Name)
			}
			d.Entities = append(d.Entities, row)
		}
	}
	c.render(ec, http.StatusOK, "connector", v, d)
	return nil
}

// guideMarkdown renders usage guides: CommonMark with GitHub's tables,
// strikethrough and autolinks, raw HTML left out, headings two levels
// down (the guide sits under the page's h1 and the section's h2).
var guideMarkdown = goldmark.New(goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(headingShift(2), 100))))

// headingShift moves every heading of a document down by its value
// (at most to h6), so that a document's outline nests in the page's.
type headingShift int

// Transform implements parser.ASTTransformer.
func (s headingShift) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if h, ok := n.(*ast.Heading); ok && entering {
			h.Level = min(h.Level+int(s), 6)
		}
		return ast.WalkContinue, nil
	})
}

// translation picks the connector's texts in the language the browser
// prefers, if the connector has one that matches better than English.
func translation(texts map[string]registry.DocsText, acceptLanguage string) (string, registry.DocsText, bool) {
	if len(texts) == 0 || acceptLanguage == "" {
		return "", registry.DocsText{}, false
	}
	keys := make([]string, 0, len(texts))
	for k := range texts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// supported[i+1] is the tag of parsed[i]; English (the manifest's own
	// texts) comes first.
	supported := []language.Tag{language.English}
	var parsed []string
	for _, k := range keys {
		if t, err := language.Parse(k); err == nil {
			supported = append(supported, t)
			parsed = append(parsed, k)
		}
	}
	prefs, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil {
		return "", registry.DocsText{}, false
	}
	_, i, conf := language.NewMatcher(supported).Match(prefs...)
	if i == 0 || conf == language.No {
		return "", registry.DocsText{}, false
	}
	key := parsed[i-1]
	return key, texts[key], true
}

// connector returns the connector the :connector path parameter names.
func (c *Console) connector(ec echo.Context) (*registry.Connector, error) {
	id := ec.Param("connector")
	x, ok := c.cfg.Catalog.Connector(id)
	if !ok {
		return nil, switchboard.E(switchboard.ErrNotFound, "connector_not_found", "the catalog has no connector %q", clipText(id))
	}
	return x, nil
}

// connectorIcon serves a connector's small or large icon from its
// verified package. SVG icons are served with a CSP that forbids script,
// so an icon cannot run code even when opened on its own.
func (c *Console) connectorIcon(ec echo.Context, _ *Viewer) error {
	x, err := c.connector(ec)
	if err != nil {
		return err
	}
	name := x.Manifest.Icons.Small
	if ec.Param("size") == "large" && x.Manifest.Icons.Large != "" {
		name = x.Manifest.Icons.Large
	}
	b, ok := x.Files[name]
	if name == "" || !ok {
		return switchboard.E(switchboard.ErrNotFound, "icon_not_found", "connector %q has no icon", x.Manifest.ID)
	}
	ctype := map[string]string{".svg": "image/svg+xml", ".png": "image/png"}[strings.ToLower(path.Ext(name))]
	if ctype == "" {
		return switchboard.E(switchboard.ErrNotFound, "icon_not_found", "connector %q has no icon in a supported format", x.Manifest.ID)
	}
	h := ec.Response().Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	return ec.Blob(http.StatusOK, ctype, b)
}
