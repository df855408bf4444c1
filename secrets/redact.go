package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// MinRedactLen is the shortest value a Redactor redacts: shorter values
// would match unrelated text and garble it, and are no credential anyway.
const MinRedactLen = 4

// minEncodedLen is the shortest encoded fragment (a base64 form of a value
// at an unknown offset) a Redactor looks for.
const minEncodedLen = 8

// Redactor replaces secret values in text that came back from outside (an
// upstream's body or headers, a verification command's output, a hosted
// MCP server's error) before it reaches an agent, a log line or an audit
// row. It is built per call from every secret in play: field values,
// access and refresh tokens, client secrets, assertions, private keys.
//
// An echoed secret does not always come back as sent, so each value is
// also looked for in the forms it commonly takes: base64 (standard and
// URL alphabets, padded or not, and embedded at any offset of a longer
// base64 text such as a Basic credential), URL query and path escaping,
// JSON string escaping, and for multi-line values (PEM keys) each line of
// the body and the body without line breaks.
//
// strings.Replacer does the replacing: it matches many needles in one pass.
// It is built on the first replacement, since most text holds no secret
// and a redactor lives as long as the instance it belongs to stays cached.
// Writing the variants by hand is what no library does for us. A nil
// Redactor redacts nothing.
type Redactor struct {
	values  []string // as given, for With
	needles []string // every form, longest first
	once    sync.Once
	repl    *strings.Replacer
}

// NewRedactor returns a redactor of values (and their forms). Values
// shorter than MinRedactLen are ignored.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{}
	for _, v := range values {
		if len(v) >= MinRedactLen && !slices.Contains(r.values, v) {
			r.values = append(r.values, v)
		}
	}
	seen := map[string]bool{}
	for _, v := range r.values {
		for _, n := range forms(v) {
			if len(n) >= MinRedactLen && !seen[n] {
				seen[n] = true
				r.needles = append(r.needles, n)
			}
		}
	}
	// Longest first: strings.Replacer prefers earlier needles at a
	// position, so a secret containing another is replaced whole.
	slices.SortStableFunc(r.needles, func(a, b string) int { return len(b) - len(a) })
	return r
}

// replacer returns the replacer of r's needles, built once.
func (r *Redactor) replacer() *strings.Replacer {
	r.once.Do(func() {
		pairs := make([]string, 0, 2*len(r.needles))
		for _, n := range r.needles {
			pairs = append(pairs, n, Redacted)
		}
		r.repl = strings.NewReplacer(pairs...)
	})
	return r.repl
}

// Covers reports whether r redacts every one of values: each is one of
// r's values or too short to be redacted at all. A redactor that covers a
// call's credentials is that call's redactor as it is.
func (r *Redactor) Covers(values ...Secret) bool {
	for _, v := range values {
		if s := v.Reveal(); len(s) >= MinRedactLen && (r == nil || !slices.Contains(r.values, s)) {
			return false
		}
	}
	return true
}

// With returns a redactor of r's values and values.
func (r *Redactor) With(values ...string) *Redactor {
	if r == nil {
		return NewRedactor(values...)
	}
	return NewRedactor(append(slices.Clone(r.values), values...)...)
}

// WithSecrets returns a redactor of r's values and the secrets' values.
func (r *Redactor) WithSecrets(values ...Secret) *Redactor {
	vs := make([]string, 0, len(values))
	for _, v := range values {
		vs = append(vs, v.Reveal())
	}
	return r.With(vs...)
}

// Len reports how many values r redacts.
func (r *Redactor) Len() int {
	if r == nil {
		return 0
	}
	return len(r.values)
}

// String returns s with every secret value, in any of its forms, replaced
// by Redacted. It allocates only when something is replaced.
func (r *Redactor) String(s string) string {
	if r == nil || len(r.needles) == 0 || !r.containsString(s) {
		return s
	}
	return r.replacer().Replace(s)
}

// Bytes is String for a byte slice; b is returned as is when it holds no
// secret.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || len(r.needles) == 0 || !r.containsBytes(b) {
		return b
	}
	return []byte(r.replacer().Replace(string(b)))
}

// Header redacts the values of h in place.
func (r *Redactor) Header(h http.Header) {
	if r == nil || len(r.needles) == 0 {
		return
	}
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = r.String(v)
		}
		h[k] = vs
	}
}

// Value redacts strings anywhere in a decoded JSON value, keys included,
// and returns the result (v itself when it holds no string).
func (r *Redactor) Value(v any) any {
	if r == nil || len(r.needles) == 0 {
		return v
	}
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

// Contains reports whether s holds a secret value in any of its forms.
func (r *Redactor) Contains(s string) bool {
	return r != nil && r.containsString(s)
}

func (r *Redactor) containsString(s string) bool {
	for _, n := range r.needles {
		if strings.Contains(s, n) {
			return true
		}
	}
	return false
}

func (r *Redactor) containsBytes(b []byte) bool {
	for _, n := range r.needles {
		if bytes.Contains(b, []byte(n)) {
			return true
		}
	}
	return false
}

// forms returns v and the forms it takes when echoed back. A multi-line
// value (a PEM key) also yields each line of its body and the body
// without line breaks, each in every form.
func forms(v string) []string {
	out := encodings(v)
	if !strings.Contains(v, "\n") {
		return out
	}
	var body strings.Builder
	for line := range strings.Lines(v) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "-----") {
			continue // PEM armour is no secret
		}
		body.WriteString(line)
		if len(line) >= 16 {
			out = append(out, encodings(line)...)
		}
	}
	return append(out, encodings(body.String())...)
}

// encodings returns v, its URL escapes, its JSON string escapes and its
// base64 encodings (alone and at any offset of a longer base64 text).
func encodings(v string) []string {
	out := []string{v}
	add := func(s string) {
		if s != v && s != "" {
			out = append(out, s)
		}
	}
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	add(jsonEscaped(v, true))
	add(jsonEscaped(v, false))
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString([]byte(v)))
		// v at offset 1 or 2 (mod 3) of a longer base64 text: the
		// characters that depend on v alone.
		for k := 1; k <= 2; k++ {
			if s := embeddedBase64(enc, v, k); len(s) >= minEncodedLen {
				add(s)
			}
		}
	}
	return out
}

// jsonEscaped is v as it appears inside a JSON string.
func jsonEscaped(v string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}

// embeddedBase64 returns the part of the base64 encoding of v, preceded by
// k other bytes and followed by any, that depends on v's bytes alone:
// what any base64 text holding v at an offset of k (mod 3) contains.
func embeddedBase64(enc *base64.Encoding, v string, k int) string {
	full := enc.EncodeToString(append(make([]byte, k), v...))
	skip := (8*k + 5) / 6 // characters touched by the k leading bytes
	keep := 4 * ((k + len(v)) / 3)
	if keep <= skip {
		return ""
	}
	return full[skip:keep]
}
