package registry

import (
	"strings"

	"github.com/switchboardhq/switchboard/secrets"
)

// Placeholder kinds, as ScanPlaceholders reports them.
const (
	// PlaceholderEnv is {ENV:NAME}: the instance's field NAME, or its
	// declared default.
	PlaceholderEnv = "env"
	// PlaceholderSecret is {SECRET:NAME}: the instance's field NAME;
	// {SECRET:<auth.param>} is the API key.
	PlaceholderSecret = "secret"
	// PlaceholderDeprecated is one of the retired forms {key},
	// {env:NAME}, {secret:NAME} and {secrets}/…; it is never substituted.
	PlaceholderDeprecated = "deprecated"
	// PlaceholderMalformed is an {ENV: or {SECRET: without a closing
	// brace or with an invalid name; it is never substituted.
	PlaceholderMalformed = "malformed"
)

// Placeholder is one placeholder found in a template.
type Placeholder struct {
	// Kind is PlaceholderEnv, PlaceholderSecret, PlaceholderDeprecated or
	// PlaceholderMalformed.
	Kind string
	// Name is the field name (empty for {key} and {secrets}).
	Name string
	// Raw is the placeholder as written.
	Raw string
	// Start and End are its byte offsets in the template.
	Start, End int
}

// ScanPlaceholders lists the placeholders of tmpl in order. Braces that
// open none of the known or deprecated forms are literal text.
func ScanPlaceholders(tmpl string) []Placeholder {
	var out []Placeholder
	for i := 0; i < len(tmpl); {
		j := strings.IndexByte(tmpl[i:], '{')
		if j < 0 {
			break
		}
		start := i + j
		p, ok := placeholderAt(tmpl, start)
		if !ok {
			i = start + 1
			continue
		}
		out = append(out, p)
		i = p.End
	}
	return out
}

// placeholderAt parses the placeholder that opens at tmpl[start] == '{'.
func placeholderAt(tmpl string, start int) (Placeholder, bool) {
	rest := tmpl[start:]
	closeAt := strings.IndexByte(rest, '}')
	body := ""
	if closeAt >= 0 {
		body = rest[1:closeAt]
	}
	mk := func(kind, name string) (Placeholder, bool) {
		return Placeholder{Kind: kind, Name: name, Raw: rest[:closeAt+1], Start: start, End: start + closeAt + 1}, true
	}
	for _, form := range []struct{ prefix, kind string }{
		{"ENV:", PlaceholderEnv}, {"SECRET:", PlaceholderSecret},
	} {
		if !strings.HasPrefix(rest[1:], form.prefix) {
			continue
		}
		if closeAt < 0 {
			return Placeholder{Kind: PlaceholderMalformed, Raw: rest, Start: start, End: len(tmpl)}, true
		}
		name := body[len(form.prefix):]
		if !validPlaceholderName(name) {
			return mk(PlaceholderMalformed, name)
		}
		return mk(form.kind, name)
	}
	if closeAt < 0 {
		return Placeholder{}, false
	}
	switch {
	case body == "key":
		return mk(PlaceholderDeprecated, "")
	case body == "secrets" && strings.HasPrefix(rest[closeAt+1:], "/"):
		return mk(PlaceholderDeprecated, "")
	case strings.HasPrefix(body, "env:") && body != "env:":
		return mk(PlaceholderDeprecated, body[len("env:"):])
	case strings.HasPrefix(body, "secret:") && body != "secret:":
		return mk(PlaceholderDeprecated, body[len("secret:"):])
	}
	return Placeholder{}, false
}

// validPlaceholderName reports whether name may be a placeholder's
// name: letters, digits, "_", "-" and ".". Whether it is declared is the
// lint's business.
func validPlaceholderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// Expand substitutes the {ENV:NAME} and {SECRET:NAME} placeholders of tmpl
// (a URL, a header value, an mcp_config.env value, a verify command
// argument) from an instance's fields. {ENV:NAME} becomes the field's value
// or, when the instance has none, its declared default; {SECRET:NAME}
// becomes the field's value; {SECRET:<auth.param>} is the API key (the
// field auth.field) when no field of that name is declared. A name the
// manifest does not declare becomes the empty string. The deprecated forms
// ({key}, {env:NAME}, {secret:NAME}, {secrets}/…) and malformed
// placeholders are left as written, never substituted.
//
// Field values are revealed into the result: the caller must treat it as
// secret whenever the template holds a {SECRET:…} placeholder.
func Expand(tmpl string, m *Manifest, fields map[string]secrets.Secret) string {
	if !strings.Contains(tmpl, "{") {
		return tmpl
	}
	return expand(tmpl, m, fields, func(p Placeholder) bool { return p.Kind == PlaceholderEnv || p.Kind == PlaceholderSecret })
}

// expand substitutes the placeholders of tmpl that fill says to.
func expand(tmpl string, m *Manifest, fields map[string]secrets.Secret, fill func(Placeholder) bool) string {
	var b strings.Builder
	last := 0
	for _, p := range ScanPlaceholders(tmpl) {
		if !fill(p) {
			continue
		}
		b.WriteString(tmpl[last:p.Start])
		last = p.End
		b.WriteString(lookupField(p, m, fields))
	}
	b.WriteString(tmpl[last:])
	return b.String()
}

// lookupField is the value of one {ENV:…} or {SECRET:…} placeholder.
func lookupField(p Placeholder, m *Manifest, fields map[string]secrets.Secret) string {
	if m == nil {
		return ""
	}
	f, ok := m.Field(p.Name)
	if !ok {
		if p.Kind == PlaceholderSecret && m.Auth.Field != "" && p.Name == m.Auth.Param {
			if v, ok := fields[m.Auth.Field]; ok {
				return v.Reveal()
			}
		}
		return ""
	}
	if v, ok := fields[p.Name]; ok && !v.IsZero() {
		return v.Reveal()
	}
	if p.Kind == PlaceholderEnv {
		return f.Default
	}
	return ""
}

// ServerURLs expands m.Servers with the instance's field values: the URL
// each operation-level server is called at, by its URL in the
// description. A field's value (or its default) may itself name other
// non-secret fields, as a server URL field's default names the fields of
// the server's variables ("https://{ENV:X_REGION}.api.example.com"):
// those are filled in a second pass. Nil when m lists no servers.
func ServerURLs(m *Manifest, fields map[string]secrets.Secret) map[string]string {
	if m == nil || len(m.Servers) == 0 {
		return nil
	}
	out := make(map[string]string, len(m.Servers))
	for from, tmpl := range m.Servers {
		u := Expand(tmpl, m, fields)
		if strings.Contains(u, "{ENV:") {
			u = expandPlainEnv(u, m, fields)
		}
		out[from] = u
	}
	return out
}

// expandPlainEnv fills the {ENV:NAME} placeholders of s that name
// non-secret fields, leaving everything else as written.
func expandPlainEnv(s string, m *Manifest, fields map[string]secrets.Secret) string {
	return expand(s, m, fields, func(p Placeholder) bool {
		f, ok := m.Field(p.Name)
		return p.Kind == PlaceholderEnv && ok && !f.Secret
	})
}
