package registry

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	switchboard "github.com/switchboardhq/switchboard"
)

// MCP Apps (the io.modelcontextprotocol/ui extension, SEP-1865): a
// connector may ship HTML views that a host renders in a sandboxed iframe
// next to a tool's result. The manifest declares each view (AppDecl); the
// catalog checks the declaration when it loads the package (CompileApps)
// and the MCP endpoint serves the compiled App: the tool it is declared on
// carries _meta.ui.resourceUri, the view is a ui:// resource whose read
// answer carries _meta.ui.csp and whose HTML carries the same policy in a
// <meta http-equiv> element, and the view reads through its bridge tool
// only (visibility ["app"], read-only actions).

// AppMIMEType is the media type of an MCP Apps view.
const AppMIMEType = "text/html;profile=mcp-app"

// AppURIScheme is the scheme of an MCP Apps view's URI.
const AppURIScheme = "ui"

// MaxAppBytes bounds the HTML of one view: a view is a small
// self-contained page, not a bundle of a web application.
const MaxAppBytes = 256 << 10

// AppMetaKey is the params._meta member by which a host marks a
// tools/call that it forwards from a view (the extension's identifier):
// such a call is held to the view's rules (a read-only action of a
// bridge tool).
const AppMetaKey = "io.modelcontextprotocol/ui"

// AppDecl is a view as the manifest declares it (connector.json "apps").
type AppDecl struct {
	// URI is ui://<connector id>/<name>.
	URI string `json:"uri"`
	// Name is the resource's display name.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// File is the HTML file in the package.
	File string `json:"file"`
	// MIMEType must be AppMIMEType.
	MIMEType string `json:"mime_type"`
	// Tool is the entity tool whose _meta.ui.resourceUri names the view.
	Tool string `json:"tool"`
	// Bridge is the one tool the view may call.
	Bridge AppBridge `json:"bridge"`
	// CSP is the extension's _meta.ui.csp: the origins the view may
	// reach beyond default-src 'none'. Field names are the spec's.
	CSP           AppCSP `json:"csp,omitempty"`
	PrefersBorder *bool  `json:"prefers_border,omitempty"`
}

// AppBridge is a view's read bridge: an app-only tool (visibility
// ["app"]) that calls the read-only Actions of entity Tool.
type AppBridge struct {
	// Name is the bridge tool's name; it must not be an entity's.
	Name    string   `json:"name"`
	Tool    string   `json:"tool"`
	Actions []string `json:"actions"`
}

// AppCSP is the extension's McpUiResourceCsp. Every source is an https
// origin (a leading "*." label allowed, as the spec allows wildcard
// subdomains).
type AppCSP struct {
	ConnectDomains  []string `json:"connectDomains,omitempty"`
	ResourceDomains []string `json:"resourceDomains,omitempty"`
	FrameDomains    []string `json:"frameDomains,omitempty"`
	BaseURIDomains  []string `json:"baseUriDomains,omitempty"`
}

// App is a compiled view, as the endpoint serves it.
type App struct {
	AppDecl
	// Policy is the view's Content-Security-Policy: default-src 'none'
	// plus what CSP declares.
	Policy string
	// HTML is the view with Policy in a <meta http-equiv> element at the
	// start of its head, so that a host that ignores _meta.ui.csp still
	// enforces it.
	HTML string
	// Bridge is the bridge tool's entity and its allowed actions, each
	// read-only.
	BridgeEntity  *Entity
	BridgeActions map[string]*Action
}

// appError is the typed error of a bad view declaration, naming the
// manifest field.
func appError(id string, i int, field, format string, args ...any) *switchboard.Error {
	return refuse(id, "connector_app_invalid", "apps[%d].%s: %s", i, field, fmt.Sprintf(format, args...))
}

// ReadOnlyOp reports whether op only reads: GET or HEAD (what the
// entity annotations call readOnlyHint).
func ReadOnlyOp(op *Operation) bool {
	return op != nil && (op.Method == "GET" || op.Method == "HEAD")
}

// CompileApps checks the manifest's views against the package's files
// and the compiled registry, and returns them compiled. A bad declaration
// is a connector_app_invalid error naming the field.
func CompileApps(m *Manifest, files map[string][]byte, api *Spec) ([]*App, error) {
	if len(m.Apps) == 0 {
		return nil, nil
	}
	id := m.ID
	if api == nil {
		return nil, refuse(id, "connector_app_invalid", "apps: only openapi connectors (whose tools are entities) may declare views")
	}
	var out []*App
	seen := map[string]bool{}
	bridges := map[string]bool{}
	for i, d := range m.Apps {
		if field, msg := checkAppDecl(id, d); field != "" {
			return nil, appError(id, i, field, "%s", msg)
		}
		if seen[d.URI] {
			return nil, appError(id, i, "uri", "%q is declared twice", d.URI)
		}
		seen[d.URI] = true
		raw, ok := files[d.File]
		if !ok {
			return nil, appError(id, i, "file", "%q is not a file of the package", d.File)
		}
		if len(raw) > MaxAppBytes {
			return nil, appError(id, i, "file", "%q is %d bytes, over the %d-byte limit of a view", d.File, len(raw), MaxAppBytes)
		}
		head, ok := headEnd(raw)
		if !ok {
			return nil, appError(id, i, "file", "%q is not an HTML document with <!doctype html> and a <head> element", d.File)
		}
		if _, ok := api.Entity(d.Tool); !ok {
			return nil, appError(id, i, "tool", "%q is not a tool of the connector", d.Tool)
		}
		b := d.Bridge
		if bridges[b.Name] {
			return nil, appError(id, i, "bridge.name", "%q is another view's bridge", b.Name)
		}
		if _, clash := api.Entity(b.Name); clash {
			return nil, appError(id, i, "bridge.name", "%q is already an entity tool", b.Name)
		}
		bridges[b.Name] = true
		be, ok := api.Entity(b.Tool)
		if !ok {
			return nil, appError(id, i, "bridge.tool", "%q is not a tool of the connector", b.Tool)
		}
		if len(b.Actions) == 0 {
			return nil, appError(id, i, "bridge.actions", "a bridge needs at least one read-only action")
		}
		actions := map[string]*Action{}
		for j, name := range b.Actions {
			a, ok := be.Action(name)
			if !ok || a.Op == nil {
				return nil, appError(id, i, fmt.Sprintf("bridge.actions[%d]", j), "%q is not an action of %s", name, b.Tool)
			}
			if !ReadOnlyOp(a.Op) {
				return nil, appError(id, i, fmt.Sprintf("bridge.actions[%d]", j), "%q is %s %s: a view reads only (GET or HEAD)", name, a.Op.Method, a.Op.Path)
			}
			actions[name] = a
		}
		policy := d.CSP.Policy()
		html := string(raw[:head]) + `<meta http-equiv="Content-Security-Policy" content="` + policy + `">` + string(raw[head:])
		out = append(out, &App{AppDecl: d, Policy: policy, HTML: html, BridgeEntity: be, BridgeActions: actions})
	}
	return out, nil
}

// checkAppDecl is what can be checked of view d of connector id without
// its package's files and registry: the URI, name, media type, file path,
// bridge name and CSP sources. It returns the failing field (relative to
// the view) and why, or "".
func checkAppDecl(id string, d AppDecl) (field, msg string) {
	u, err := url.Parse(d.URI)
	switch {
	case err != nil || u.Scheme != AppURIScheme || u.Path == "" || u.Path == "/" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.Contains(u.Path, "//"):
		return "uri", fmt.Sprintf("%q must be ui://%s/<name>", d.URI, id)
	case u.Host != id:
		return "uri", fmt.Sprintf("%q must name its connector: ui://%s/<name>", d.URI, id)
	case d.Name == "":
		return "name", "a view needs a name"
	case d.MIMEType != AppMIMEType:
		return "mime_type", fmt.Sprintf("%q must be %q", d.MIMEType, AppMIMEType)
	case !cleanRelPath(d.File):
		return "file", fmt.Sprintf("%q is not a clean relative path", d.File)
	case !validToolName(d.Bridge.Name):
		return "bridge.name", fmt.Sprintf("%q is not a valid tool name", d.Bridge.Name)
	}
	for _, f := range []struct {
		field   string
		sources []string
	}{
		{"csp.connectDomains", d.CSP.ConnectDomains}, {"csp.resourceDomains", d.CSP.ResourceDomains},
		{"csp.frameDomains", d.CSP.FrameDomains}, {"csp.baseUriDomains", d.CSP.BaseURIDomains},
	} {
		for j, src := range f.sources {
			if why := checkOrigin(src); why != "" {
				return fmt.Sprintf("%s[%d]", f.field, j), fmt.Sprintf("%q %s", src, why)
			}
		}
	}
	return "", ""
}

// validToolName reports whether s is a tool name as entities have them.
func validToolName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkOrigin returns why s is not an https origin, or "". A leading
// "*." label is allowed; a path, query, user or non-numeric port is not.
// The checks also keep every character that could end the policy's
// attribute or directive (quotes, ';', ',', spaces) out of it.
func checkOrigin(s string) string {
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok {
		return "is not an https origin (https://host[:port])"
	}
	host := strings.TrimPrefix(rest, "*.")
	if h, port, err := net.SplitHostPort(host); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return "has an invalid port"
		}
		host = h
	}
	if host == "" || len(host) > 253 {
		return "has no host"
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "is not an https origin: a host name is letters, digits and hyphens"
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "is not an https origin: a lower-case host name, no path, query or user"
			}
		}
	}
	return ""
}

// Policy is the Content-Security-Policy of a view that declares c:
// default-src 'none', inline script and style (a view is one
// self-contained document), images and media also from data: URLs, and
// each declared origin in the directives the spec maps it to; nothing
// else, no form submission and no plugins.
func (c AppCSP) Policy() string {
	var b strings.Builder
	dir := func(name string, base []string, extra []string) {
		b.WriteString("; ")
		b.WriteString(name)
		if len(base)+len(extra) == 0 {
			b.WriteString(" 'none'")
			return
		}
		for _, s := range base {
			b.WriteString(" " + s)
		}
		for _, s := range extra {
			b.WriteString(" " + s)
		}
	}
	b.WriteString("default-src 'none'")
	dir("script-src", []string{"'unsafe-inline'"}, c.ResourceDomains)
	dir("style-src", []string{"'unsafe-inline'"}, c.ResourceDomains)
	dir("img-src", []string{"data:"}, c.ResourceDomains)
	dir("font-src", nil, c.ResourceDomains)
	dir("media-src", []string{"data:"}, c.ResourceDomains)
	dir("connect-src", nil, c.ConnectDomains)
	dir("frame-src", nil, c.FrameDomains)
	dir("base-uri", nil, c.BaseURIDomains)
	dir("object-src", nil, nil)
	dir("form-action", nil, nil)
	return b.String()
}

// headEnd returns the offset just after the document's <head> start tag,
// where the policy's meta element goes, and whether raw is a view
// document: <!doctype html>, an optional <html> start tag, then <head>,
// with only white space between them, so that nothing the document loads
// or runs comes before the policy.
func headEnd(raw []byte) (int, bool) {
	const doctype = "<!doctype html>"
	start := len(raw) - len(bytes.TrimLeft(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")), " \t\r\n"))
	pos := start
	if len(raw)-pos < len(doctype) || !bytes.EqualFold(raw[pos:pos+len(doctype)], []byte(doctype)) {
		return 0, false
	}
	pos += len(doctype)
	// tag returns the end of the start tag name at pos (after white
	// space), attributes allowed, or -1.
	tag := func(pos int, name string) int {
		for pos < len(raw) && strings.IndexByte(" \t\r\n", raw[pos]) >= 0 {
			pos++
		}
		open := "<" + name
		if len(raw)-pos <= len(open) || !bytes.EqualFold(raw[pos:pos+len(open)], []byte(open)) {
			return -1
		}
		pos += len(open)
		if strings.IndexByte("> \t\r\n", raw[pos]) < 0 {
			return -1
		}
		k := bytes.IndexByte(raw[pos:], '>')
		if k < 0 {
			return -1
		}
		return pos + k + 1
	}
	if end := tag(pos, "html"); end >= 0 {
		pos = end
	}
	end := tag(pos, "head")
	return end, end >= 0
}
