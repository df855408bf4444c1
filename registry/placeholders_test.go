package registry_test

import (
	"slices"
	"testing"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	m := &registry.Manifest{
		Auth: registry.Auth{Type: "api_key", Param: "api_key", Field: "NOTES_TOKEN"},
		Env: []registry.Field{
			{Name: "NOTES_TOKEN", Secret: true, Required: true},
			{Name: "HOST", Default: "notes.example.test"},
			{Name: "REGION"},
		},
	}
	fields := map[string]secrets.Secret{
		"NOTES_TOKEN": secrets.New("tok-123"),
		"REGION":      secrets.New("eu"),
		"UNDECLARED":  secrets.New("never"),
	}
	tests := []struct{ tmpl, want string }{
		{"https://{ENV:HOST}/v1", "https://notes.example.test/v1"}, // default
		{"https://{ENV:HOST}/{ENV:REGION}", "https://notes.example.test/eu"},
		{"Bearer {SECRET:NOTES_TOKEN}", "Bearer tok-123"},
		{"{SECRET:api_key}", "tok-123"},             // {SECRET:<auth.param>} is the API key
		{"x{ENV:UNDECLARED}y{SECRET:NOPE}z", "xyz"}, // undeclared: empty
		{"{ENV:NOTES_TOKEN}", "tok-123"},            // a declared field either way
		{"Bearer {key}", "Bearer {key}"},            // deprecated: never substituted
		{"{env:HOST}", "{env:HOST}"},
		{"{secret:NOTES_TOKEN}", "{secret:NOTES_TOKEN}"},
		{"{secrets}/token", "{secrets}/token"},
		{"{ENV:HOST", "{ENV:HOST"}, // malformed
		{"{ENV:}", "{ENV:}"},
		{`{"json": {"a": 1}}`, `{"json": {"a": 1}}`}, // other braces are text
		{"", ""},
		{"plain", "plain"},
	}
	for _, tt := range tests {
		if got := registry.Expand(tt.tmpl, m, fields); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.tmpl, got, tt.want)
		}
	}
	if got := registry.Expand("{ENV:HOST}", nil, nil); got != "" {
		t.Errorf("nil manifest: %q", got)
	}
}

func TestScanPlaceholders(t *testing.T) {
	t.Parallel()
	got := registry.ScanPlaceholders("a{ENV:A}b{SECRET:B}{key}{env:c}{secrets}/x{secrets}{ENV:bad name}{nope}")
	var kinds []string
	for _, p := range got {
		kinds = append(kinds, p.Kind+":"+p.Name)
	}
	want := []string{"env:A", "secret:B", "deprecated:", "deprecated:c", "deprecated:", "malformed:bad name"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("kinds = %v, want %v", kinds, want)
	}
}
