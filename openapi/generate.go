package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// Package file names written by Generate.
const (
	ManifestFile = "connector.json"
	MappingFile  = "mapping.json"
)

// GenerateOptions tune Generate.
type GenerateOptions struct {
	// ID is the connector id (a slug); empty derives it from the title.
	ID string
	// SpecName is the description's file name; its extension (.json,
	// .yaml, .yml) names the copy in the package ("openapi" + extension).
	SpecName string
	// Description is the connector's description for agents and people;
	// empty takes the description's info.description, or else derives
	// one from its title and tools (a package must lint clean).
	Description string
}

// Package is a generated connector package: file name -> content.
type Package struct {
	Files map[string][]byte
	// Result is the compilation the package was generated from.
	Result *Result
}

// Generate builds a connector package from a vendor description and an
// optional entity mapping: the manifest (connector.json) with env fields
// for what the servers and security schemes need, the entity mapping it
// chose (mapping.json), and the description, copied unchanged. The same
// input always gives byte-identical files.
func Generate(spec, mapping []byte, opts GenerateOptions) (*Package, error) {
	r, err := Analyze(spec, mapping)
	if err != nil {
		return nil, err
	}
	ext := strings.ToLower(path.Ext(opts.SpecName))
	switch ext {
	case ".json", ".yaml":
	case ".yml":
		ext = ".yaml"
	default:
		ext = ".json"
		if t := bytes.TrimSpace(spec); len(t) > 0 && t[0] != '{' {
			ext = ".yaml"
		}
	}
	specFile := "openapi" + ext
	for _, n := range r.knowledgeNotes {
		r.Findings = append(r.Findings, Finding{Severity: SeverityWarning, Rule: "knowledge-proposed", File: MappingFile, Path: "$.knowledge", Message: n})
	}
	m, err := manifest(r.Doc, opts.ID, specFile, describe(r, opts.Description))
	if err != nil {
		return nil, err
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	mapb, err := json.MarshalIndent(r.Mapping, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the mapping: %w", err)
	}
	return &Package{Result: r, Files: map[string][]byte{
		ManifestFile: append(mb, '\n'),
		MappingFile:  append(mapb, '\n'),
		specFile:     spec,
	}}, nil
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slugOf derives a connector id from a title: "Twilio - Api" -> "twilio-api".
func slugOf(title string) string {
	s := strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(title), "-"), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	if s == "" {
		s = "connector"
	}
	return s
}

// envPrefix is the upper snake prefix of a connector's field names.
func envPrefix(id string) string {
	first, _, _ := strings.Cut(id, "-")
	return strings.ToUpper(strings.ReplaceAll(first, "-", "_"))
}

// semverPattern matches a semantic version MAJOR.MINOR.PATCH with optional
// pre-release and build parts.
var semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// manifest derives the connector manifest from the description.
func manifest(doc *openapi3.T, id, specFile, desc string) (*registry.Manifest, error) {
	title, version := "", ""
	if doc.Info != nil {
		title, version = doc.Info.Title, doc.Info.Version
	}
	if id == "" {
		id = slugOf(title)
	}
	if !switchboard.ValidSlug(id) {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_id", "connector id %q is not a slug (lower-case letters, digits and inner hyphens)", truncate(id, 80))
	}
	if title == "" {
		title = id
	}
	// The connector's version is semver (the catalog requires it); the
	// vendor's API version, often a date, goes into the description.
	apiVersion := version
	if !semverPattern.MatchString(version) {
		version = "1.0.0"
	}
	prefix := envPrefix(id)
	m := &registry.Manifest{
		ID: id, Name: truncate(title, 100), Version: truncate(version, 40), Type: registry.TypeOpenAPI, Scope: "global",
		Description: truncate(oneLine(firstParagraph(desc)), 300),
		Docs:        registry.Docs{LLMShortDescription: truncate(firstParagraph(desc), 600)},
		OpenAPI:     specFile,
		Mapping:     MappingFile,
	}
	if doc.ExternalDocs != nil {
		m.Docs.URL = doc.ExternalDocs.URL
	}
	m.Env, m.BaseURL = serverFields(doc.Servers, prefix)
	auth, fields := authFields(doc, prefix, id)
	m.Auth = auth
	m.Env = append(fields, m.Env...)
	opFields, servers := operationServerFields(doc, prefix, m.Env)
	m.Env, m.Servers = append(m.Env, opFields...), servers
	if auth.Field != "" && auth.Type != "password" {
		m.Requires = append(m.Requires, "API_KEY")
	}
	if auth.Type == "oauth2" {
		m.Requires = append(m.Requires, "OAUTH")
	}
	if apiVersion != "" && apiVersion != version {
		m.Docs.LLMShortDescription = strings.TrimSpace(truncate(m.Docs.LLMShortDescription, 560) + " (API version " + truncate(apiVersion, 30) + ")")
	}
	return m, nil
}

// describe is the connector's description: the one given, the
// description's own, or one derived from its title and tools, so that a
// generated manifest never lacks one (lint requires it).
func describe(r *Result, given string) string {
	if d := strings.TrimSpace(given); d != "" {
		return d
	}
	if r.Doc.Info != nil && strings.TrimSpace(r.Doc.Info.Description) != "" {
		return r.Doc.Info.Description
	}
	title := ""
	if r.Doc.Info != nil {
		title = strings.TrimSpace(r.Doc.Info.Title)
	}
	if title == "" {
		title = "This API"
	}
	ops := 0
	names := make([]string, 0, len(r.Spec.Entities))
	for _, e := range r.Spec.Entities {
		ops += len(e.Actions)
		names = append(names, e.Name)
	}
	list := strings.Join(names, ", ")
	if len(names) > 12 {
		list = strings.Join(names[:12], ", ") + fmt.Sprintf(" and %d more", len(names)-12)
	}
	if ops == 0 {
		return title + ": no operations."
	}
	return fmt.Sprintf("%s: %d operations on %s.", title, ops, list)
}

func firstParagraph(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	return strings.Join(strings.Fields(s), " ")
}

// serverFields returns the env fields and base URL template for the
// description's first server: one field per server variable, the URL
// built from them; or, without variables, one URL field whose default is
// the server's URL.
func serverFields(servers openapi3.Servers, prefix string) ([]registry.Field, string) {
	var srv *openapi3.Server
	for _, s := range servers {
		if s != nil && s.URL != "" {
			srv = s
			break
		}
	}
	urlField := prefix + "_API_URL"
	if srv == nil || !strings.HasPrefix(srv.URL, "http") {
		f := registry.Field{Name: urlField, Label: "API base URL", Required: true,
			Description: "The API's absolute base URL: the description names no absolute server."}
		if srv != nil {
			f.Example = srv.URL
		}
		return []registry.Field{f}, "{ENV:" + urlField + "}"
	}
	if len(srv.Variables) == 0 {
		return []registry.Field{{Name: urlField, Label: "API base URL", Default: srv.URL, Example: srv.URL,
			Description: "The API root. Keep the default unless the vendor gives you another one."}}, "{ENV:" + urlField + "}"
	}
	var fields []registry.Field
	base := srv.URL
	for _, name := range sortedKeys(srv.Variables) {
		v := srv.Variables[name]
		if v == nil {
			continue
		}
		fn := prefix + "_" + strings.ToUpper(snake(name, 40))
		fields = append(fields, variableField(fn, name, v, "the API's base URL"))
		base = strings.ReplaceAll(base, "{"+name+"}", "{ENV:"+fn+"}")
	}
	return fields, base
}

// variableField is the field fn of the server variable name of the
// server where.
func variableField(fn, name string, v *openapi3.ServerVariable, where string) registry.Field {
	d := strings.TrimSpace(v.Description)
	if len(v.Enum) > 0 {
		d = strings.TrimSpace(d + " One of: " + strings.Join(v.Enum, ", ") + ".")
	}
	if d == "" {
		d = "The server variable " + name + " of " + where + "."
	}
	return registry.Field{Name: fn, Label: name, Default: v.Default, Description: truncate(d, 500), Required: v.Default == ""}
}

// schemeRank orders security schemes by preference: a bearer token, an
// API key in a header, in a query or cookie, OAuth 2, basic credentials.
func schemeRank(s *openapi3.SecurityScheme) int {
	switch {
	case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
		return 0
	case s.Type == "apiKey" && s.In == "header":
		return 1
	case s.Type == "apiKey":
		return 2
	case s.Type == "oauth2", s.Type == "openIdConnect":
		return 3
	case s.Type == "http" && strings.EqualFold(s.Scheme, "basic"):
		return 4
	}
	return 5
}

func schemeDesc(s *openapi3.SecurityScheme, def string) string {
	if d := strings.TrimSpace(s.Description); d != "" {
		return truncate(strings.Join(strings.Fields(d), " "), 500)
	}
	return def
}

// oauthScopes lists the scheme's scopes, sorted, once each.
func oauthScopes(s *openapi3.SecurityScheme) []string {
	var out []string
	if f := s.Flows; f != nil {
		for _, fl := range []*openapi3.OAuthFlow{f.AuthorizationCode, f.Implicit, f.ClientCredentials, f.Password} {
			if fl != nil {
				out = append(out, sortedKeys(fl.Scopes)...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hasOAuth reports whether the description has an OAuth 2.0 or OpenID
// Connect security scheme: people then connect their own accounts, and a
// knowledge source reads per reader.
func hasOAuth(doc *openapi3.T) bool {
	if doc == nil || doc.Components == nil {
		return false
	}
	for _, s := range doc.Components.SecuritySchemes {
		if s != nil && s.Value != nil && (s.Value.Type == "oauth2" || s.Value.Type == "openIdConnect") {
			return true
		}
	}
	return false
}
