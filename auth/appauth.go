package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// ModeInput is what an auth mode builds upstream credentials from.
type ModeInput struct {
	Tenant   switchboard.TenantID
	Instance *tenants.Instance
	Manifest *registry.Manifest
	// Fields are the instance's decrypted field values by name.
	Fields map[string]secrets.Secret
	// Principal is the caller the upstream call is made for.
	Principal *Principal
}

// ModeFunc builds the Applier of one auth mode (buildAppAuth).
type ModeFunc func(ctx context.Context, in ModeInput) (registry.Applier, error)

// AppAuth is buildAppAuth: it turns an instance's auth mode and field
// values into a registry.Applier. Modes are registered by name; a mode
// without an implementation is an ErrUnavailable error with code
// "auth_mode_not_available".
type AppAuth struct {
	mu    sync.RWMutex
	modes map[string]ModeFunc
	// checks say, for the modes whose credential is each user's own,
	// whether the call's user has one (Connected).
	checks map[string]CheckFunc
	// static are the modes whose Applier depends on nothing but the
	// instance's manifest, field values and mode (no user, no clock):
	// one built for a set of field values serves every call with them.
	static map[string]bool
}

// CheckFunc reports whether a mode's credential exists for the call's
// user, without obtaining it: nil, or the error a call would answer
// (reconnect_required with where the user connects, user_required...).
type CheckFunc func(ctx context.Context, in ModeInput) error

// RegisterCheck sets the connection check of mode, replacing any
// previous one.
func (a *AppAuth) RegisterCheck(mode string, f CheckFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checks[mode] = f
}

// Connected reports whether in's user has what in.Instance's auth mode
// needs of them: nil for a mode whose credential is the instance's (no
// check registered), else the mode's check. It sends nothing upstream and
// mints nothing: a search asks it of every instance it lists.
func (a *AppAuth) Connected(ctx context.Context, in ModeInput) error {
	if in.Instance == nil {
		return nil
	}
	a.mu.RLock()
	f := a.checks[in.Instance.AuthMode]
	a.mu.RUnlock()
	if f == nil {
		return nil
	}
	return f(ctx, in)
}

// NewAppAuth returns the modes available now: apiKey and accessToken.
// clientCredentials, oauth, oauthCentral and jwt are registered by the
// packages that implement them, through Register.
func NewAppAuth() *AppAuth {
	a := &AppAuth{modes: map[string]ModeFunc{}, checks: map[string]CheckFunc{}, static: map[string]bool{}}
	a.Register(registry.ModeAPIKey, apiKeyMode)
	a.Register(registry.ModeAccessToken, accessTokenMode)
	a.static[registry.ModeAPIKey] = true
	a.static[registry.ModeAccessToken] = true
	return a
}

// Static reports whether the Applier of mode is a function of the
// instance's manifest and field values alone (apiKey, accessToken): the
// caller may keep the one Build returned with those values and use it for
// every call made with them. Appliers are safe for concurrent use.
func (a *AppAuth) Static(mode string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.static[mode]
}

// Register sets the implementation of mode, replacing any previous one.
func (a *AppAuth) Register(mode string, f ModeFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.modes[mode] = f
	// A replacement may depend on more than the fields.
	delete(a.static, mode)
}

// Build returns the Applier for in.Instance's auth mode.
func (a *AppAuth) Build(ctx context.Context, in ModeInput) (registry.Applier, error) {
	if in.Instance == nil || in.Manifest == nil {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_config", "no instance to authenticate")
	}
	mode := in.Instance.AuthMode
	if mode == "" && in.Manifest.Auth.Type == "none" {
		// A public API: nothing to send.
		return noCredentials{}, nil
	}
	a.mu.RLock()
	f := a.modes[mode]
	a.mu.RUnlock()
	if f == nil {
		return nil, switchboard.E(switchboard.ErrUnavailable, "auth_mode_not_available",
			"auth mode %q is not available on this server yet", truncate(mode, 40))
	}
	ap, err := f(ctx, in)
	if err != nil {
		return nil, err
	}
	return withSchemes(mode, ap, in), nil
}

// noCredentials is the Applier of a connector whose API takes no
// credentials.
type noCredentials struct{}

func (noCredentials) Apply(*http.Request) error { return nil }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// reconnect is the error of a credential field that has no value.
func reconnect(field string) error {
	return switchboard.E(switchboard.ErrUnauthorized, "reconnect_required",
		"the app instance has no value for its credential field %s; set it and reconnect the app", field)
}

func badConfig(m *registry.Manifest, format string, args ...any) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_config", "connector %s: %s", m.ID, fmt.Sprintf(format, args...))
}

// part is a piece of a rendered credential: literal text or a secret.
type part struct {
	text   string
	secret secrets.Secret
	isSec  bool
}

// render reveals the parts into the credential value. Call it only inside
// Apply.
func render(parts []part) string {
	if len(parts) == 1 {
		if parts[0].isSec {
			return parts[0].secret.Reveal()
		}
		return parts[0].text
	}
	var b strings.Builder
	for _, p := range parts {
		if p.isSec {
			b.WriteString(p.secret.Reveal())
		} else {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

// secretPlaceholder opens a {SECRET:NAME} placeholder in Auth.Format.
const secretPlaceholder = "{SECRET:"

// parseFormat splits format into literal text and {SECRET:NAME} fields.
func parseFormat(m *registry.Manifest, format string, fields map[string]secrets.Secret) ([]part, error) {
	var parts []part
	for {
		i := strings.Index(format, secretPlaceholder)
		if i < 0 {
			if format != "" {
				parts = append(parts, part{text: format})
			}
			return parts, nil
		}
		if i > 0 {
			parts = append(parts, part{text: format[:i]})
		}
		rest := format[i+len(secretPlaceholder):]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			return nil, badConfig(m, "auth format has an unterminated {SECRET: placeholder")
		}
		name := rest[:j]
		v, ok := fields[name]
		if !ok || v.IsZero() {
			return nil, reconnect(name)
		}
		parts = append(parts, part{secret: v, isSec: true})
		format = rest[j+1:]
	}
}

// Deliveries of an API key.
const (
	DeliveryHeader = "header"
	DeliveryQuery  = "query"
	DeliveryCookie = "cookie"
)

// apiKeyMode delivers the API key where the manifest says: a header, a
// query parameter or a cookie named Auth.Param, rendered by Auth.Format.
func apiKeyMode(_ context.Context, in ModeInput) (registry.Applier, error) {
	m := in.Manifest
	au := m.Auth
	delivery := au.Delivery
	if delivery == "" {
		delivery = DeliveryHeader
	}
	if delivery != DeliveryHeader && delivery != DeliveryQuery && delivery != DeliveryCookie {
		return nil, badConfig(m, "auth delivery %q is not header, query or cookie", truncate(delivery, 20))
	}
	if au.Param == "" {
		return nil, badConfig(m, "auth delivery %s names no param", delivery)
	}
	var parts []part
	if au.Format != "" {
		var err error
		if parts, err = parseFormat(m, au.Format, in.Fields); err != nil {
			return nil, err
		}
	} else {
		if au.Field == "" {
			return nil, badConfig(m, "mode apiKey needs auth.field or auth.format")
		}
		v, ok := in.Fields[au.Field]
		if !ok || v.IsZero() {
			return nil, reconnect(au.Field)
		}
		// The one part held in the applier (one allocation per call).
		k := &keyApplier{delivery: delivery, param: au.Param}
		k.one[0], k.sec[0] = part{secret: v, isSec: true}, v
		k.parts = k.one[:]
		return k, nil
	}
	return &keyApplier{delivery: delivery, param: au.Param, parts: parts}, nil
}

// accessTokenMode sends a ready token: Authorization: Bearer <token>.
func accessTokenMode(_ context.Context, in ModeInput) (registry.Applier, error) {
	m := in.Manifest
	field := m.Auth.TokenField
	if field == "" {
		return nil, badConfig(m, "mode accessToken needs auth.token_field")
	}
	v, ok := in.Fields[field]
	if !ok || v.IsZero() {
		return nil, reconnect(field)
	}
	return &keyApplier{delivery: DeliveryHeader, param: "Authorization", parts: []part{{text: "Bearer "}, {secret: v, isSec: true}}}, nil
}

// keyApplier injects a static credential. It holds secrets, never plain
// strings, and reveals them only in Apply.
type keyApplier struct {
	delivery string
	param    string
	parts    []part
	one      [1]part // parts of a credential that is one secret
	sec      [1]secrets.Secret
	// headers is where the Dispatcher keeps the header maps it made with
	// this applier (registry.FixedHeaderApplier): a credential in a
	// header is the same on every request.
	headers registry.HeaderCache
}

// HeaderCache implements registry.FixedHeaderApplier: Apply of a
// credential delivered in a header sets that header, always to the same
// value (parts never change).
func (k *keyApplier) HeaderCache() *registry.HeaderCache {
	if k.delivery != DeliveryHeader {
		return nil
	}
	return &k.headers
}

// Format implements fmt.Formatter: fmt reaches unexported fields by
// reflection, past secrets.Secret's own redaction, so the applier prints
// itself without its parts.
func (k *keyApplier) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "auth.keyApplier{%s %s %s}", k.delivery, k.param, secrets.Redacted)
}

// LogValue implements slog.LogValuer.
func (k *keyApplier) LogValue() slog.Value {
	return slog.GroupValue(slog.String("delivery", k.delivery), slog.String("param", k.param), slog.String("value", secrets.Redacted))
}

// Secrets implements SecretHolder: the secret parts of the credential.
func (k *keyApplier) Secrets() []secrets.Secret {
	if k.parts != nil && &k.parts[0] == &k.one[0] {
		// Read-only, as every SecretHolder's answer: the applier's own.
		return k.sec[:1:1]
	}
	var out []secrets.Secret
	for _, p := range k.parts {
		if p.isSec {
			out = append(out, p.secret)
		}
	}
	return out
}

var errBadCredentialValue = switchboard.E(switchboard.ErrInvalid, "invalid_config",
	"the app instance's credential holds characters that cannot be sent; set it again")

// Apply implements registry.Applier. Any value the request already has
// under the credential's name is replaced.
func (k *keyApplier) Apply(req *http.Request) error {
	v := render(k.parts)
	switch k.delivery {
	case DeliveryHeader:
		if strings.ContainsAny(v, "\r\n\x00") {
			return errBadCredentialValue
		}
		req.Header.Set(k.param, v)
	case DeliveryQuery:
		req.URL.RawQuery = withQueryParam(req.URL.RawQuery, k.param, v)
	case DeliveryCookie:
		if strings.ContainsAny(v, ";\r\n\x00\"\\,") || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r >= 0x7f }) {
			return errBadCredentialValue
		}
		req.Header.Set("Cookie", withCookie(req.Header.Get("Cookie"), k.param, v))
	}
	return nil
}

// withQueryParam returns raw with every name parameter removed and
// name=value appended.
func withQueryParam(raw, name, value string) string {
	var kept []string
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, _, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == name {
			continue
		}
		kept = append(kept, kv)
	}
	kept = append(kept, url.QueryEscape(name)+"="+url.QueryEscape(value))
	return strings.Join(kept, "&")
}

// withCookie returns the Cookie header with the cookie name replaced.
func withCookie(header, name, value string) string {
	var kept []string
	for _, c := range strings.Split(header, ";") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if k, _, _ := strings.Cut(c, "="); k == name {
			continue
		}
		kept = append(kept, c)
	}
	kept = append(kept, name+"="+value)
	return strings.Join(kept, "; ")
}

// ExpandEnv fills the placeholders of tmpl (such as a connector's base
// URL) from the instance's fields: it is registry.Expand, the one
// placeholder implementation. {ENV:NAME} becomes the field NAME or, when
// the instance has no value for it, the field's declared Default; a name
// the manifest does not declare expands to the empty string; deprecated
// and malformed placeholders are left as written. Field values are
// revealed into the result: use it for values that are not secret, such
// as URLs and tenant ids.
func ExpandEnv(tmpl string, m *registry.Manifest, fields map[string]secrets.Secret) string {
	return registry.Expand(tmpl, m, fields)
}
