package auth_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

const canary = "canary-7c1d-key"

func manifest(a registry.Auth) *registry.Manifest {
	return &registry.Manifest{ID: "acme-api", Auth: a, Env: []registry.Field{
		{Name: "API_KEY", Secret: true}, {Name: "ACCOUNT"}, {Name: "API_URL", Default: "https://api.example.test"},
	}}
}

func build(t *testing.T, mode string, a registry.Auth, fields map[string]secrets.Secret) (registry.Applier, error) {
	t.Helper()
	return auth.NewAppAuth().Build(context.Background(), auth.ModeInput{
		Tenant:   "ten_1",
		Instance: &tenants.Instance{ID: "ins_1", TenantID: "ten_1", Slug: "shop", AuthMode: mode},
		Manifest: manifest(a),
		Fields:   fields,
	})
}

func TestAppAuthDelivers(t *testing.T) {
	t.Parallel()
	fields := map[string]secrets.Secret{"API_KEY": secrets.New(canary), "ACCOUNT": secrets.New("acct 9")}
	for _, tc := range []struct {
		name  string
		mode  string
		auth  registry.Auth
		check func(r *http.Request) string
		want  string
	}{
		{"header, bare value", registry.ModeAPIKey, registry.Auth{Delivery: "header", Param: "X-Api-Key", Field: "API_KEY"},
			func(r *http.Request) string { return r.Header.Get("X-Api-Key") }, canary},
		{"default delivery is a header", registry.ModeAPIKey, registry.Auth{Param: "X-Api-Key", Field: "API_KEY"},
			func(r *http.Request) string { return r.Header.Get("X-Api-Key") }, canary},
		{"header, formatted from two fields", registry.ModeAPIKey, registry.Auth{Delivery: "header", Param: "Authorization", Format: "Key {SECRET:API_KEY}/{SECRET:ACCOUNT}"},
			func(r *http.Request) string { return r.Header.Get("Authorization") }, "Key " + canary + "/acct 9"},
		{"query replaces a caller's value", registry.ModeAPIKey, registry.Auth{Delivery: "query", Param: "api_key", Field: "API_KEY"},
			func(r *http.Request) string { return r.URL.RawQuery }, "limit=5&api_key=" + canary},
		{"cookie replaces a caller's value", registry.ModeAPIKey, registry.Auth{Delivery: "cookie", Param: "sid", Field: "API_KEY"},
			func(r *http.Request) string { return r.Header.Get("Cookie") }, "theme=dark; sid=" + canary},
		{"access token", registry.ModeAccessToken, registry.Auth{TokenField: "API_KEY"},
			func(r *http.Request) string { return r.Header.Get("Authorization") }, "Bearer " + canary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ap, err := build(t, tc.mode, tc.auth, fields)
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprintf("%v %+v %#v", ap, ap, ap); strings.Contains(s, canary) {
				t.Errorf("the applier prints its secret: %s", s)
			}
			r, _ := http.NewRequest("GET", "https://api.example.test/x?limit=5&api_key=mine", nil)
			r.Header.Set("Cookie", "sid=mine; theme=dark")
			r.Header.Set("X-Api-Key", "mine")
			if err := ap.Apply(r); err != nil {
				t.Fatal(err)
			}
			if got := tc.check(r); got != tc.want {
				t.Errorf("delivered %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAppAuthRefuses(t *testing.T) {
	t.Parallel()
	key := map[string]secrets.Secret{"API_KEY": secrets.New(canary)}
	for _, tc := range []struct {
		name   string
		mode   string
		auth   registry.Auth
		fields map[string]secrets.Secret
		kind   error
		code   string
		names  string
	}{
		{"missing key field", registry.ModeAPIKey, registry.Auth{Param: "X-Api-Key", Field: "API_KEY"}, nil, switchboard.ErrUnauthorized, "reconnect_required", "API_KEY"},
		{"empty key field", registry.ModeAPIKey, registry.Auth{Param: "X-Api-Key", Field: "API_KEY"}, map[string]secrets.Secret{"API_KEY": {}}, switchboard.ErrUnauthorized, "reconnect_required", "API_KEY"},
		{"missing format field", registry.ModeAPIKey, registry.Auth{Param: "X", Format: "{SECRET:API_KEY}:{SECRET:ACCOUNT}"}, key, switchboard.ErrUnauthorized, "reconnect_required", "ACCOUNT"},
		{"missing token field", registry.ModeAccessToken, registry.Auth{TokenField: "TOKEN"}, key, switchboard.ErrUnauthorized, "reconnect_required", "TOKEN"},
		{"no param", registry.ModeAPIKey, registry.Auth{Field: "API_KEY"}, key, switchboard.ErrInvalid, "invalid_config", "param"},
		{"bad delivery", registry.ModeAPIKey, registry.Auth{Delivery: "body", Param: "k", Field: "API_KEY"}, key, switchboard.ErrInvalid, "invalid_config", "body"},
		{"unterminated format", registry.ModeAPIKey, registry.Auth{Param: "k", Format: "{SECRET:API_KEY"}, key, switchboard.ErrInvalid, "invalid_config", "unterminated"},
		{"oauth not yet", registry.ModeOAuth, registry.Auth{}, key, switchboard.ErrUnavailable, "auth_mode_not_available", "oauth"},
		{"jwt not yet", registry.ModeJWT, registry.Auth{}, key, switchboard.ErrUnavailable, "auth_mode_not_available", "jwt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := build(t, tc.mode, tc.auth, tc.fields)
			e, ok := switchboard.AsError(err)
			if !ok || !errors.Is(err, tc.kind) || e.Code != tc.code {
				t.Fatalf("err = %v, want %v %s", err, tc.kind, tc.code)
			}
			if !strings.Contains(e.Message, tc.names) || strings.Contains(err.Error(), canary) {
				t.Errorf("message %q should name %q and never the key", e.Message, tc.names)
			}
		})
	}
}

func TestAppAuthApplyRefusesLineBreaks(t *testing.T) {
	t.Parallel()
	ap, err := build(t, registry.ModeAPIKey, registry.Auth{Param: "X-Api-Key", Field: "API_KEY"},
		map[string]secrets.Secret{"API_KEY": secrets.New(canary + "\r\nX-Evil: 1")})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest("GET", "https://api.example.test/", nil)
	err = ap.Apply(r)
	if err == nil || strings.Contains(err.Error(), canary) || r.Header.Get("X-Api-Key") != "" {
		t.Errorf("Apply = %v, header %q", err, r.Header.Get("X-Api-Key"))
	}
}

func TestAppAuthRegister(t *testing.T) {
	t.Parallel()
	a := auth.NewAppAuth()
	var got auth.ModeInput
	a.Register(registry.ModeJWT, func(_ context.Context, in auth.ModeInput) (registry.Applier, error) {
		got = in
		return nil, nil
	})
	p := &auth.Principal{AgentID: "agent-1"}
	_, err := a.Build(context.Background(), auth.ModeInput{
		Instance: &tenants.Instance{AuthMode: registry.ModeJWT}, Manifest: manifest(registry.Auth{}), Principal: p,
	})
	if err != nil || got.Principal != p {
		t.Errorf("registered mode not used: %v", err)
	}
}

func TestExpandEnv(t *testing.T) {
	t.Parallel()
	m := manifest(registry.Auth{})
	fields := map[string]secrets.Secret{"ACCOUNT": secrets.New("acct9")}
	for _, tc := range []struct{ tmpl, want string }{
		{"https://{ENV:ACCOUNT}.example.test/v1", "https://acct9.example.test/v1"},
		{"{ENV:API_URL}/v2", "https://api.example.test/v2"},
		{"https://x.test/{ENV:UNDECLARED}", "https://x.test/"},
		{"https://plain.test", "https://plain.test"},
		{"https://x.test/{ENV:ACCOUNT", "https://x.test/{ENV:ACCOUNT"},
		{"", ""},
	} {
		if got := auth.ExpandEnv(tc.tmpl, m, fields); got != tc.want {
			t.Errorf("ExpandEnv(%q) = %q, want %q", tc.tmpl, got, tc.want)
		}
	}
}

func TestAppAuthApplierLogsRedacted(t *testing.T) {
	t.Parallel()
	ap, err := build(t, registry.ModeAPIKey, registry.Auth{Param: "X-Api-Key", Field: "API_KEY"},
		map[string]secrets.Secret{"API_KEY": secrets.New(canary)})
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("applier", "applier", ap)
	if strings.Contains(buf.String(), canary) || !strings.Contains(buf.String(), secrets.Redacted) {
		t.Errorf("log line = %s", buf.String())
	}
}

// TestAppAuthStatic: only the modes whose applier depends on the
// instance's fields alone are static (the gateway keeps their applier
// with the fields), and a mode registered again is not.
func TestAppAuthStatic(t *testing.T) {
	t.Parallel()
	a := auth.NewAppAuth()
	for mode, want := range map[string]bool{
		registry.ModeAPIKey: true, registry.ModeAccessToken: true,
		registry.ModeJWT: false, "oauth": false, "clientCredentials": false, "": false,
	} {
		if got := a.Static(mode); got != want {
			t.Errorf("Static(%q) = %v, want %v", mode, got, want)
		}
	}
	a.Register(registry.ModeAPIKey, func(context.Context, auth.ModeInput) (registry.Applier, error) { return nil, nil })
	if a.Static(registry.ModeAPIKey) {
		t.Error("a mode registered again is still static")
	}
}
