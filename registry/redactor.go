package registry

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/switchboardhq/switchboard/secrets"
)

// Redactor replaces an instance's secret field values in text that came
// back from outside (a verification command's output, a hosted MCP
// server's error message) before it is shown or stored.
type Redactor struct{ values []string }

// NewRedactor collects the values to redact: every field m declares
// secret, and the credential fields of its auth block.
func NewRedactor(m *Manifest, fields map[string]secrets.Secret) *Redactor {
	r := &Redactor{}
	for name, v := range fields {
		f, declared := m.Field(name)
		if !(declared && f.Secret) && name != m.Auth.Field && name != m.Auth.TokenField {
			continue
		}
		if s := v.Reveal(); s != "" && !slices.Contains(r.values, s) {
			r.values = append(r.values, s)
		}
	}
	// Longest first, so that a secret containing another is replaced whole.
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

// String returns s with every secret value replaced by secrets.Redacted.
func (r *Redactor) String(s string) string {
	for _, v := range r.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, secrets.Redacted)
		}
	}
	return s
}

// Value redacts strings anywhere in a decoded JSON value, keys included.
func (r *Redactor) Value(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.Value(e)
		}
		return out
	case json.Number:
		return json.Number(r.String(string(x)))
	}
	return v
}
