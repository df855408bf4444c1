package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Finding severities.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Finding is one problem LintManifest found: where it is (the JSON path in
// the manifest), what is wrong and how to fix it.
type Finding struct {
	// Severity is SeverityError or SeverityWarning.
	Severity string `json:"severity"`
	// Rule is a stable identifier of the rule broken, such as
	// "version-semver".
	Rule string `json:"rule"`
	// File is the package file the path is in (connector.json).
	File string `json:"file,omitempty"`
	// Path is a JSON path into the file, such as $.env[2].name.
	Path    string `json:"path"`
	Message string `json:"message"`
	// Fix says what to change.
	Fix string `json:"fix,omitempty"`
}

// String renders the finding as one line:
// "error: connector.json $.path: message (fix: ...)".
func (f Finding) String() string {
	where := f.Path
	if f.File != "" {
		where = f.File + " " + where
	}
	s := f.Severity + ": " + where + ": " + f.Message
	if f.Fix != "" {
		s += " (fix: " + f.Fix + ")"
	}
	return s
}

// ManifestFile is the file name of a connector's manifest in its folder.
const ManifestFile = manifestName

// Enumerations of the manifest.
var (
	manifestTypes     = []string{TypeOpenAPI, TypeMCPRemote, TypeMCPLocal}
	manifestScopes    = []string{"global", "user"}
	manifestRequires  = []string{"API_KEY", "OAUTH", "DOCKER", "NODE", "PYTHON", "ENV"}
	manifestAuthTypes = []string{"api_key", "oauth2", "password", "none"}
	manifestModes     = []string{ModeAPIKey, ModeAccessToken, ModeClientCredentials, ModeOAuth, ModeOAuthCentral, ModeJWT}
	apiKeyDeliveries  = []string{"header", "query", "cookie"}
	tokenDeliveries   = []string{"env", "file"}
	tokenAuthMethods  = []string{"client_secret_basic", "client_secret_post", "none"}
)

var (
	semverPattern   = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
	kebabPattern    = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	envNamePattern  = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)
	languagePattern = regexp.MustCompile(`^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$`)
	expectPattern   = regexp.MustCompile(`^[1-5]xx$`)
	identPattern    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// manifestKeys is the manifest's schema as allowed keys per object; "*"
// marks a map whose keys are free, "[]" an array of objects.
var manifestKeys = map[string][]string{
	"$":                      {"id", "name", "version", "type", "scope", "requires", "tags", "user_description", "auth", "docs", "env", "icons", "openapi", "mapping", "base_url", "servers", "verify", "mcp_config", "apps"},
	"$.servers":              {"*"},
	"$.auth":                 {"type", "modes", "delivery", "param", "format", "field", "token_field", "provider", "scopes", "deliver", "token_auth_method", "schemes"},
	"$.auth.schemes":         {"[]"},
	"$.auth.schemes[]":       {"name", "kind", "delivery", "param", "format", "field"},
	"$.auth.deliver":         {"as", "format", "env", "path"},
	"$.docs":                 {"llm_short_description", "guide", "guide_required", "url", "translations", "search_keywords"},
	"$.docs.search_keywords": {"*"},
	"$.docs.translations":    {"*"},
	"$.docs.translations.*":  {"name", "user_description", "llm_short_description", "guide"},
	"$.env":                  {"[]"},
	"$.env[]":                {"name", "label", "description", "required", "secret", "default", "example", "scope"},
	"$.icons":                {"small", "large"},
	"$.verify":               {"command", "timeout_secs", "probe"},
	"$.verify.probe":         {"operation", "expect", "args"},
	"$.verify.probe.args":    {"*"},
	"$.mcp_config":           {"url", "headers", "command", "env"},
	"$.mcp_config.headers":   {"*"},
	"$.mcp_config.env":       {"*"},
	"$.apps":                 {"[]"},
	"$.apps[]":               {"uri", "name", "description", "file", "mime_type", "tool", "bridge", "csp", "prefers_border"},
	"$.apps[].bridge":        {"name", "tool", "actions"},
	"$.apps[].csp":           {"connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"},
}

// forbiddenKeys are keys (lower case, without "_" and "-") that would put a
// client credential, an endpoint URL or a redirect URI in a manifest.
var forbiddenKeys = []string{
	"clientid", "clientsecret", "secret", "apikey", "password", "token", "accesstoken", "refreshtoken",
	"authorizationurl", "authorizeurl", "authurl", "tokenurl", "authorizationendpoint", "tokenendpoint",
	"endpoint", "endpoints", "redirecturi", "redirecturl", "redirecturis", "callbackurl", "issuer",
}

// maxLLMShortDescription bounds docs.llm_short_description, in bytes.
const maxLLMShortDescription = 1024

// LintManifest checks a connector manifest (the bytes of connector.json)
// against the manifest schema: required fields by type, the enumerations,
// the semver version, the id (kebab-case, equal to folder when folder is
// not empty), env[] fields, the auth variants, verify, icons and docs, and
// the placeholders of every substituted string. files lists the paths of
// the package's files relative to its folder; when it is nil the checks
// that a referenced file exists are skipped. Every finding names the JSON
// path and the fix; findings are in a stable order. The manifest is
// publishable when no finding is an error.
func LintManifest(raw []byte, folder string, files []string) []Finding {
	l := &linter{}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		msg := "the manifest is not a JSON object"
		if err != nil {
			msg = "the manifest is not valid JSON: " + err.Error()
		}
		l.errorf("json-invalid", "$", "write connector.json as one JSON object", "%s", msg)
		return l.out
	}
	l.schema("$", doc)

	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			l.errorf("json-type", "$."+te.Field, "give it a JSON "+jsonKind(te.Type.Kind().String()),
				"%s is a JSON %s", te.Field, te.Value)
		} else {
			l.errorf("json-invalid", "$", "fix the JSON syntax", "%v", err)
		}
		return l.out
	}
	l.manifest(&m, doc, folder, files)
	return l.out
}

// jsonKind names a Go kind as a JSON type.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "struct", "map", "ptr":
		return "object"
	default:
		return "number"
	}
}

type linter struct{ out []Finding }

func (l *linter) add(sev, rule, path, fix, format string, args ...any) {
	l.out = append(l.out, Finding{Severity: sev, Rule: rule, File: ManifestFile, Path: path, Message: fmt.Sprintf(format, args...), Fix: fix})
}

func (l *linter) errorf(rule, path, fix, format string, args ...any) {
	l.add(SeverityError, rule, path, fix, format, args...)
}

func (l *linter) warnf(rule, path, fix, format string, args ...any) {
	l.add(SeverityWarning, rule, path, fix, format, args...)
}

// apps checks the MCP Apps views as far as the manifest and the file
// list tell (CompileApps checks the rest when the catalog loads the
// package: the HTML, the tools and the actions).
func (l *linter) apps(m *Manifest, has func(string) bool) {
	if len(m.Apps) > 0 && m.Type != TypeOpenAPI {
		l.errorf("app-invalid", "$.apps", "remove apps: only openapi connectors, whose tools are entities, may declare views", "type %q cannot declare views", m.Type)
		return
	}
	for i, d := range m.Apps {
		at := fmt.Sprintf("$.apps[%d]", i)
		if field, msg := checkAppDecl(m.ID, d); field != "" {
			l.errorf("app-invalid", at+"."+field, "see MCP Apps views in the README: ui://<id>/<name>, text/html;profile=mcp-app, https origins", "%s", msg)
			continue
		}
		if !has(d.File) {
			l.errorf("file-missing", at+".file", "add the view's HTML to the package", "%q is not a file of the package", d.File)
		}
	}
}

// memberPath renders an object member in a JSON path.
func memberPath(parent, k string) string {
	if identPattern.MatchString(k) {
		return parent + "." + k
	}
	return parent + "[" + strconv.Quote(k) + "]"
}

// schema walks the decoded manifest and reports unknown members and
// members that carry credentials or endpoints.
func (l *linter) schema(at string, v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	allowed := manifestKeys[at]
	for _, k := range lintKeys(obj) {
		p := memberPath(at, k)
		norm := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
		free := slices.Contains(allowed, "*")
		switch {
		case free || slices.Contains(allowed, k):
		case slices.Contains(forbiddenKeys, norm):
			l.errorf("forbidden-credential", p,
				"remove it: OAuth clients and provider endpoints come from the platform's provider registry (name it in auth.provider), and per-tenant values are env[] fields filled at install",
				"a manifest never carries client ids, client secrets, credentials, endpoint URLs or redirect URIs")
			continue
		default:
			l.errorf("unknown-field", p, "remove it or correct its spelling; allowed here: "+strings.Join(allowed, ", "),
				"unknown member %q", k)
			continue
		}
		child := at + "." + k
		if free {
			child = at + ".*"
		}
		switch x := obj[k].(type) {
		case map[string]any:
			if _, ok := manifestKeys[child]; ok {
				l.schema(child, x)
			}
		case []any:
			if slices.Contains(manifestKeys[child], "[]") {
				for _, e := range x {
					l.schema(child+"[]", e)
				}
			}
		}
	}
}

// manifest applies the semantic rules.
func (l *linter) manifest(m *Manifest, doc map[string]any, folder string, files []string) {
	has := func(p string) bool { return files == nil || slices.Contains(files, p) }
	l.apps(m, has)

	// Identity.
	switch {
	case m.ID == "":
		l.errorf("required", "$.id", `add "id": the connector's kebab-case id, equal to its folder name`, "id is missing")
	case !kebabPattern.MatchString(m.ID) || len(m.ID) > 64:
		l.errorf("id-kebab", "$.id", "use lower-case letters, digits and single hyphens, such as "+strconv.Quote(kebabSuggest(m.ID)), "id %q is not kebab-case", clipLint(m.ID))
	case folder != "" && m.ID != folder:
		l.errorf("id-folder", "$.id", fmt.Sprintf("rename the folder to %q or set id to %q", m.ID, folder), "id %q does not equal the folder %q", clipLint(m.ID), clipLint(folder))
	}
	if m.Name == "" {
		l.errorf("required", "$.name", `add "name": the connector's display name`, "name is missing")
	}
	switch {
	case m.Version == "":
		l.errorf("required", "$.version", `add "version": a semantic version such as "1.0.0"`, "version is missing")
	case !semverPattern.MatchString(m.Version):
		l.errorf("version-semver", "$.version", `use a semantic version MAJOR.MINOR.PATCH such as "1.0.0"`, "version %q is not a semantic version", clipLint(m.Version))
	}
	switch {
	case m.Type == "":
		l.errorf("required", "$.type", "add \"type\": one of "+strings.Join(manifestTypes, ", "), "type is missing")
	case m.Type == "script":
		l.errorf("type-reserved", "$.type", "use one of "+strings.Join(manifestTypes, ", "), "type \"script\" is reserved and not supported")
	case !slices.Contains(manifestTypes, m.Type):
		l.errorf("type-enum", "$.type", "use one of "+strings.Join(manifestTypes, ", "), "unknown type %q", clipLint(m.Type))
	}
	switch {
	case m.Scope == "":
		l.errorf("required", "$.scope", `add "scope": "global" (one connection per instance) or "user" (each user connects their own account)`, "scope is missing")
	case !slices.Contains(manifestScopes, m.Scope):
		l.errorf("scope-enum", "$.scope", "use global or user", "unknown scope %q", clipLint(m.Scope))
	}
	for i, r := range m.Requires {
		p := fmt.Sprintf("$.requires[%d]", i)
		switch {
		case r == "SECRETS_DIR":
			l.errorf("requires-deprecated", p, "replace it with ENV, declare each secret as an env[] field with \"secret\": true and reference it as {SECRET:NAME}", "SECRETS_DIR is deprecated")
		case !slices.Contains(manifestRequires, r):
			l.errorf("requires-enum", p, "use one of "+strings.Join(manifestRequires, ", "), "unknown requirement %q", clipLint(r))
		case slices.Index(m.Requires, r) != i:
			l.errorf("requires-duplicate", p, "remove the duplicate", "%s is listed twice", r)
		}
	}
	for i, t := range m.Tags {
		if !kebabPattern.MatchString(t) {
			l.errorf("tag-format", fmt.Sprintf("$.tags[%d]", i), "use a lower-case kebab-case tag such as "+strconv.Quote(kebabSuggest(t)), "tag %q is not kebab-case", clipLint(t))
		}
	}

	l.env(m)
	if slices.Contains(m.Requires, "ENV") && len(m.Env) == 0 {
		l.errorf("requires-env", "$.env", `declare the variables in "env": [{"name": "...", "label": "..."}] or remove ENV from requires`, "requires lists ENV but env[] declares no field")
	}
	l.auth(m)
	l.typeRules(m, has)
	l.verify(m)
	l.docs(m, has)
	l.icons(m, has)
	l.placeholders(m)
}

// env checks env[].
func (l *linter) env(m *Manifest) {
	seen := map[string]bool{}
	for i, f := range m.Env {
		p := fmt.Sprintf("$.env[%d]", i)
		switch {
		case f.Name == "":
			l.errorf("required", p+".name", "give the field an UPPER_SNAKE_CASE name", "the field has no name")
		case !envNamePattern.MatchString(f.Name):
			l.errorf("env-name", p+".name", "rename it "+strconv.Quote(upperSnake(f.Name)), "field name %q is not UPPER_SNAKE_CASE", clipLint(f.Name))
		case seen[f.Name]:
			l.errorf("env-duplicate", p+".name", "declare each field once", "field %q is declared twice", f.Name)
		}
		seen[f.Name] = true
		if strings.TrimSpace(f.Label) == "" {
			l.errorf("required", p+".label", "add a label: what the install form shows", "field %q has no label", clipLint(f.Name))
		}
		if f.Required && f.Default != "" {
			l.errorf("env-default-required", p+".default", `remove "default", or make the field optional ("required": false)`, "a required field cannot have a default")
		}
		if f.Secret && (f.Default != "" || f.Example != "") {
			which := "default"
			if f.Default == "" {
				which = "example"
			}
			l.errorf("env-secret-value", p+"."+which, "remove it: a manifest never carries a secret value", "secret field %q has a %s", clipLint(f.Name), which)
		}
		if f.Scope != "" && !slices.Contains(manifestScopes, f.Scope) {
			l.errorf("scope-enum", p+".scope", "use global (set by an admin at install) or user (each user sets their own)", "unknown field scope %q", clipLint(f.Scope))
		}
	}
}

// auth checks the auth variants.
func (l *linter) auth(m *Manifest) {
	a := &m.Auth
	credential := func(p, name string) {
		f, ok := m.Field(name)
		switch {
		case !ok:
			l.errorf("field-undeclared", p, fmt.Sprintf("declare %q in env[] with \"secret\": true", name), "field %q is not declared in env[]", clipLint(name))
		case !f.Secret:
			l.errorf("field-not-secret", p, fmt.Sprintf("set \"secret\": true on env field %q", name), "field %q holds a credential but is not secret", clipLint(name))
		}
	}
	switch a.Type {
	case "":
		l.errorf("required", "$.auth.type", "add auth.type: one of "+strings.Join(manifestAuthTypes, ", "), "auth.type is missing")
	case "api_key":
		switch {
		case a.Delivery == "":
			l.errorf("required", "$.auth.delivery", "set auth.delivery to header, query or cookie", "an api_key connector needs auth.delivery")
		case !slices.Contains(apiKeyDeliveries, a.Delivery):
			l.errorf("delivery-enum", "$.auth.delivery", "use header, query or cookie", "unknown delivery %q", clipLint(a.Delivery))
		}
		if a.Param == "" {
			l.errorf("required", "$.auth.param", "set auth.param to the header, query parameter or cookie name that carries the key", "an api_key connector needs auth.param")
		}
		if a.Field == "" && a.TokenField == "" {
			l.errorf("required", "$.auth.field", "set auth.field to the secret env[] field that holds the key", "an api_key connector needs auth.field")
		}
	case "oauth2":
		switch {
		case a.Provider == "":
			l.errorf("required", "$.auth.provider", "set auth.provider to the platform's provider slug, such as \"google\"", "an oauth2 connector needs auth.provider")
		case !kebabPattern.MatchString(a.Provider):
			l.errorf("provider-slug", "$.auth.provider", "use the provider's slug from the platform's provider registry, not a URL", "provider %q is not a slug", clipLint(a.Provider))
		}
		if len(a.Scopes) == 0 {
			l.errorf("required", "$.auth.scopes", "list the OAuth scopes the connector needs", "an oauth2 connector needs auth.scopes")
		}
		if (a.Deliver == nil || a.Deliver.As == "") && m.Type == TypeMCPLocal {
			l.errorf("required", "$.auth.deliver", "set auth.deliver to env or file", "an mcp_local oauth2 connector needs auth.deliver")
		}
	case "password":
		if a.Field == "" {
			l.errorf("required", "$.auth.field", "set auth.field to the secret env[] field that holds the password", "a password connector needs auth.field")
		}
	case "none":
		if len(a.Modes) > 0 || a.Field != "" || a.Provider != "" {
			l.errorf("auth-none", "$.auth", `remove modes, field and provider, or choose another auth.type`, "auth type none takes no credentials")
		}
	default:
		l.errorf("auth-type-enum", "$.auth.type", "use one of "+strings.Join(manifestAuthTypes, ", "), "unknown auth type %q", clipLint(a.Type))
	}
	if a.TokenAuthMethod != "" && !slices.Contains(tokenAuthMethods, a.TokenAuthMethod) {
		l.errorf("token-auth-method-enum", "$.auth.token_auth_method", "use client_secret_basic, client_secret_post or none",
			"unknown token_auth_method %q", clipLint(a.TokenAuthMethod))
	}
	if d := a.Deliver; d != nil {
		if !slices.Contains(tokenDeliveries, d.As) {
			l.errorf("deliver-enum", "$.auth.deliver", "use env or file", "unknown deliver %q", clipLint(d.As))
		}
		if d.Format != "" && !slices.Contains(DeliveryFormats, d.Format) {
			l.errorf("deliver-format-enum", "$.auth.deliver.format", "use one of "+strings.Join(DeliveryFormats, ", "), "unknown deliver format %q", clipLint(d.Format))
		}
		if d.Env != "" && !envNamePattern.MatchString(d.Env) {
			l.errorf("env-name", "$.auth.deliver.env", "use an UPPER_SNAKE_CASE variable name", "deliver env %q is not UPPER_SNAKE_CASE", clipLint(d.Env))
		}
		if d.Path != "" && !cleanRelPath(d.Path) {
			l.errorf("file-path", "$.auth.deliver.path", "use a relative path without .. or a leading /", "deliver path %q is not a clean relative path", clipLint(d.Path))
		}
	}
	if a.Field != "" {
		credential("$.auth.field", a.Field)
	}
	if a.TokenField != "" {
		credential("$.auth.token_field", a.TokenField)
	}
	for i, sc := range a.Schemes {
		p := fmt.Sprintf("$.auth.schemes[%d]", i)
		if sc.Name == "" {
			l.errorf("required", p+".name", "name the description's security scheme", "the scheme has no name")
		}
		switch sc.Kind {
		case SchemeOAuth2:
		case SchemeAPIKey, SchemeBasic, SchemeBearer:
			if !slices.Contains(apiKeyDeliveries, sc.Delivery) {
				l.errorf("delivery-enum", p+".delivery", "use header, query or cookie", "unknown delivery %q", clipLint(sc.Delivery))
			}
			if sc.Param == "" {
				l.errorf("required", p+".param", "name the header, query parameter or cookie that carries the credential", "the scheme names no param")
			}
			if sc.Field == "" {
				l.errorf("required", p+".field", "set the secret env[] field that holds the credential", "the scheme names no field")
			} else {
				credential(p+".field", sc.Field)
			}
		default:
			l.errorf("scheme-kind-enum", p+".kind", "use api_key, basic, bearer or oauth2", "unknown scheme kind %q", clipLint(sc.Kind))
		}
	}
	for i, mode := range a.Modes {
		p := fmt.Sprintf("$.auth.modes[%d]", i)
		switch {
		case !slices.Contains(manifestModes, mode):
			l.errorf("mode-enum", p, "use one of "+strings.Join(manifestModes, ", "), "unknown auth mode %q", clipLint(mode))
		case mode == ModeAPIKey && a.Field == "":
			l.errorf("mode-needs-field", p, "set auth.field to the env[] field holding the key", "mode apiKey needs auth.field")
		case mode == ModeAccessToken && a.TokenField == "":
			l.errorf("mode-needs-field", p, "set auth.token_field to the env[] field holding the token", "mode accessToken needs auth.token_field")
		case (mode == ModeOAuth || mode == ModeOAuthCentral) && a.Type != "oauth2":
			l.errorf("mode-auth-type", p, `set auth.type to "oauth2" with a provider, or remove the mode`, "mode %s needs auth.type oauth2", mode)
		}
	}
	if looksLikeURL(a.Param) {
		l.errorf("forbidden-credential", "$.auth.param", "name the header, query parameter or cookie; endpoints come from the platform's provider registry or an env[] field", "a manifest never carries endpoint URLs")
	}
	switch {
	case a.Type == "oauth2" && !slices.Contains(m.Requires, "OAUTH"):
		l.warnf("requires-auth", "$.requires", `add "OAUTH" to requires`, "an oauth2 connector should list OAUTH in requires")
	case a.Type == "api_key" && !slices.Contains(m.Requires, "API_KEY"):
		l.warnf("requires-auth", "$.requires", `add "API_KEY" to requires`, "an api_key connector should list API_KEY in requires")
	}
}

func looksLikeURL(s string) bool {
	s = strings.ToLower(s)
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// typeRules checks what each connector type requires.
func (l *linter) typeRules(m *Manifest, has func(string) bool) {
	file := func(p, ref, what string) {
		if ref == "" {
			return
		}
		if !cleanRelPath(ref) {
			l.errorf("file-path", p, "use a relative path inside the connector folder, without .. or a leading /", "%s path %q is not a clean relative path", what, clipLint(ref))
		} else if !has(ref) {
			l.errorf("file-missing", p, fmt.Sprintf("add %s to the connector folder or correct the path", ref), "%s %q is not in the package", what, clipLint(ref))
		}
	}
	switch m.Type {
	case TypeOpenAPI:
		if m.OpenAPI == "" {
			l.errorf("required", "$.openapi", `set "openapi" to the path of the vendor's OpenAPI description in the folder`, "an openapi connector needs its description")
		}
		if m.MCPConfig != nil {
			l.errorf("type-mismatch", "$.mcp_config", "remove mcp_config, or change type to mcp_remote or mcp_local", "mcp_config is only for MCP connectors")
		}
	case TypeMCPRemote:
		if m.MCPConfig == nil || m.MCPConfig.URL == "" {
			l.errorf("required", "$.mcp_config.url", `set mcp_config.url to the server's Streamable HTTP URL, such as "https://{ENV:HOST}/mcp"`, "an mcp_remote connector needs mcp_config.url")
		} else if u := m.MCPConfig.URL; !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "{ENV:") {
			l.errorf("url-https", "$.mcp_config.url", "use an https:// URL or an {ENV:NAME} placeholder", "mcp_config.url must be https")
		}
	case TypeMCPLocal:
		if m.MCPConfig == nil || len(m.MCPConfig.Command) == 0 {
			l.errorf("required", "$.mcp_config.command", `set mcp_config.command to the server's argv, such as ["node", "dist/index.js"]`, "an mcp_local connector needs mcp_config.command")
		}
		if !slices.ContainsFunc(m.Requires, func(r string) bool { return r == "DOCKER" || r == "NODE" || r == "PYTHON" }) {
			l.warnf("requires-runtime", "$.requires", "list the runtime the server needs: DOCKER, NODE or PYTHON", "an mcp_local connector should name its runtime")
		}
	}
	if m.Type != TypeOpenAPI && slices.Contains(manifestTypes, m.Type) && m.OpenAPI != "" {
		l.errorf("type-mismatch", "$.openapi", "remove openapi, or change type to openapi", "only openapi connectors have a description")
	}
	file("$.openapi", m.OpenAPI, "description")
	file("$.mapping", m.Mapping, "mapping")
}

// verify checks the verify section.
func (l *linter) verify(m *Manifest) {
	v := m.Verify
	if v == nil {
		return
	}
	switch {
	case len(v.Command) == 0 && v.Probe == nil:
		l.errorf("verify-empty", "$.verify", "give verify a command (argv) or a probe, or remove it", "verify has neither command nor probe")
	case len(v.Command) > 0 && v.Probe != nil:
		l.errorf("verify-both", "$.verify", "keep either command or probe", "verify has both a command and a probe")
	}
	for i, a := range v.Command {
		if a == "" {
			l.errorf("verify-command", fmt.Sprintf("$.verify.command[%d]", i), "remove the empty argument", "empty argument")
		}
	}
	if v.TimeoutSecs < 0 || v.TimeoutSecs > 300 {
		l.errorf("verify-timeout", "$.verify.timeout_secs", fmt.Sprintf("use 1 to 300 seconds (default %d)", DefaultVerifyTimeout), "timeout_secs %d is out of range", v.TimeoutSecs)
	}
	if p := v.Probe; p != nil {
		if m.Type != TypeOpenAPI && slices.Contains(manifestTypes, m.Type) {
			l.errorf("verify-probe-type", "$.verify.probe", "use verify.command for MCP connectors", "a probe needs an openapi connector")
		}
		if p.Operation == "" {
			l.errorf("required", "$.verify.probe.operation", "name the operationId (or entity.action) to call", "the probe names no operation")
		}
		if p.Expect != "" && !expectPattern.MatchString(p.Expect) {
			l.errorf("verify-expect", "$.verify.probe.expect", `use a status class such as "2xx"`, "expect %q is not a status class", clipLint(p.Expect))
		}
	}
}

// docs checks docs and its translations.
func (l *linter) docs(m *Manifest, has func(string) bool) {
	d := &m.Docs
	switch {
	case strings.TrimSpace(d.LLMShortDescription) == "":
		l.errorf("required", "$.docs.llm_short_description", "add a one-paragraph description of what the connector lets an agent do", "docs.llm_short_description is missing")
	case len(d.LLMShortDescription) > maxLLMShortDescription:
		l.errorf("docs-length", "$.docs.llm_short_description", fmt.Sprintf("shorten it to at most %d bytes; put details in the guide", maxLLMShortDescription), "llm_short_description is %d bytes", len(d.LLMShortDescription))
	}
	guide := func(p, ref string) {
		if ref == "" {
			return
		}
		if !cleanRelPath(ref) || !has(ref) {
			l.errorf("file-missing", p, fmt.Sprintf("add %s to the connector folder or correct the path", clipLint(ref)), "guide %q is not in the package", clipLint(ref))
		}
	}
	guide("$.docs.guide", d.Guide)
	langs := make([]string, 0, len(d.Translations))
	for k := range d.Translations {
		langs = append(langs, k)
	}
	slices.Sort(langs)
	for _, lang := range langs {
		p := memberPath("$.docs.translations", lang)
		if !languagePattern.MatchString(lang) {
			l.errorf("docs-language", p, `key translations by a BCP 47 language tag such as "de" or "pt-BR"`, "%q is not a language tag", clipLint(lang))
			continue
		}
		t := d.Translations[lang]
		if len(t.LLMShortDescription) > maxLLMShortDescription {
			l.errorf("docs-length", p+".llm_short_description", fmt.Sprintf("shorten it to at most %d bytes", maxLLMShortDescription), "llm_short_description is %d bytes", len(t.LLMShortDescription))
		}
		guide(p+".guide", t.Guide)
	}
}

// icons checks that the icons are listed files of a served type.
func (l *linter) icons(m *Manifest, has func(string) bool) {
	for _, ic := range []struct{ p, ref string }{{"$.icons.small", m.Icons.Small}, {"$.icons.large", m.Icons.Large}} {
		if ic.ref == "" {
			continue
		}
		switch {
		case IconContentType(ic.ref) == "":
			l.errorf("icon-type", ic.p, "use an .svg or .png file", "icon %q is neither SVG nor PNG", clipLint(ic.ref))
		case !cleanRelPath(ic.ref) || !has(ic.ref):
			l.errorf("file-missing", ic.p, fmt.Sprintf("add %s to the connector folder or correct the path", clipLint(ic.ref)), "icon %q is not in the package", clipLint(ic.ref))
		}
	}
}

// IconContentType is the content type an icon is served with, from its
// extension: image/svg+xml or image/png; empty for anything else.
func IconContentType(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	}
	return ""
}

// placeholders checks every string that is substituted at run time.
func (l *linter) placeholders(m *Manifest) {
	keyField := m.Auth.Field
	if keyField == "" {
		keyField = "NAME"
	}
	check := func(p, s string) {
		for _, ph := range ScanPlaceholders(s) {
			switch ph.Kind {
			case PlaceholderDeprecated:
				repl := "{SECRET:NAME} with a secret env[] field NAME"
				switch {
				case ph.Raw == "{key}":
					repl = "{SECRET:" + keyField + "}"
				case strings.HasPrefix(ph.Raw, "{env:"):
					repl = "{ENV:" + ph.Name + "}"
				case strings.HasPrefix(ph.Raw, "{secret:"):
					repl = "{SECRET:" + ph.Name + "}"
				}
				l.errorf("placeholder-deprecated", p, "replace "+ph.Raw+" with "+repl, "deprecated placeholder %s is never substituted", clipLint(ph.Raw))
			case PlaceholderMalformed:
				l.errorf("placeholder-malformed", p, "write {ENV:NAME} or {SECRET:NAME} with a declared field name and a closing brace", "malformed placeholder %s", clipLint(ph.Raw))
			default:
				if _, ok := m.Field(ph.Name); ok {
					continue
				}
				if ph.Kind == PlaceholderSecret && ph.Name == m.Auth.Param && m.Auth.Field != "" {
					continue // {SECRET:<auth.param>} is the API key
				}
				l.errorf("placeholder-undeclared", p, fmt.Sprintf("declare %q in env[] or correct the name", ph.Name), "%s names a field env[] does not declare; it would be empty", clipLint(ph.Raw))
			}
		}
	}
	check("$.base_url", m.BaseURL)
	for _, k := range lintKeys(m.Servers) {
		check(memberPath("$.servers", k), m.Servers[k])
	}
	check("$.auth.format", m.Auth.Format)
	for i, sc := range m.Auth.Schemes {
		check(fmt.Sprintf("$.auth.schemes[%d].format", i), sc.Format)
	}
	if v := m.Verify; v != nil {
		for i, a := range v.Command {
			check(fmt.Sprintf("$.verify.command[%d]", i), a)
		}
		if v.Probe != nil {
			for _, k := range lintKeys(v.Probe.Args) {
				check(memberPath("$.verify.probe.args", k), v.Probe.Args[k])
			}
		}
	}
	if c := m.MCPConfig; c != nil {
		check("$.mcp_config.url", c.URL)
		for _, k := range lintKeys(c.Headers) {
			check(memberPath("$.mcp_config.headers", k), c.Headers[k])
		}
		for i, a := range c.Command {
			check(fmt.Sprintf("$.mcp_config.command[%d]", i), a)
		}
		for _, k := range lintKeys(c.Env) {
			check(memberPath("$.mcp_config.env", k), c.Env[k])
		}
	}
}

// lintKeys returns the keys of m, sorted.
func lintKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// clipLint bounds a value quoted in a message.
func clipLint(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// kebabSuggest turns s into a kebab-case suggestion.
func kebabSuggest(s string) string {
	var b strings.Builder
	dash, lower := false, false
	for _, r := range s {
		upper := r >= 'A' && r <= 'Z'
		if upper && lower {
			dash = true // a camelCase boundary
		}
		lower = (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')
		if upper || lower {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r | 0x20) // lower case; digits are unchanged
			dash = false
		} else {
			dash = true
		}
	}
	if b.Len() == 0 {
		return "my-connector"
	}
	return b.String()
}

// upperSnake turns s into an UPPER_SNAKE_CASE suggestion.
func upperSnake(s string) string {
	return strings.ToUpper(strings.ReplaceAll(kebabSuggest(s), "-", "_"))
}
