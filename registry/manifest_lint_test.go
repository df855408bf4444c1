package registry_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/registry"
)

// lintFiles are the files of the fixtures' package.
var lintFiles = []string{"connector.json", "openapi.json", "mapping.json", "guide.md", "guide.de.md", "icon-32.svg", "icon-128.png"}

func lintFixture(t *testing.T, name string) []registry.Finding {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "lint", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return registry.LintManifest(raw, "notes", lintFiles)
}

func TestLintManifestValid(t *testing.T) {
	t.Parallel()
	if got := lintFixture(t, "valid"); len(got) != 0 {
		t.Fatalf("the valid fixture has findings: %v", got)
	}
}

// TestLintManifestDefects lints fixtures with one defect each: each yields
// exactly one error, with its rule, JSON path and a fix.
func TestLintManifestDefects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture, rule, path, fix string
	}{
		{"id-kebab", "id-kebab", "$.id", `"notes-app"`},
		{"id-folder", "id-folder", "$.id", "rename the folder"},
		{"id-missing", "required", "$.id", `add "id"`},
		{"version-semver", "version-semver", "$.version", "1.0.0"},
		{"type-enum", "type-enum", "$.type", "openapi, mcp_remote, mcp_local"},
		{"type-reserved", "type-reserved", "$.type", "openapi"},
		{"scope-enum", "scope-enum", "$.scope", "global or user"},
		{"requires-enum", "requires-enum", "$.requires[1]", "API_KEY"},
		{"requires-deprecated", "requires-deprecated", "$.requires[1]", "{SECRET:NAME}"},
		{"env-name", "env-name", "$.env[2].name", `"NOTES_REGION"`},
		{"env-default-required", "env-default-required", "$.env[2].default", "remove"},
		{"env-duplicate", "env-duplicate", "$.env[2].name", "once"},
		{"env-secret-value", "env-secret-value", "$.env[0].example", "remove"},
		{"env-label", "required", "$.env[1].label", "label"},
		{"requires-env", "requires-env", "$.env", "env"},
		{"forbidden-client-secret", "forbidden-credential", "$.auth.client_secret", "provider registry"},
		{"forbidden-redirect-uri", "forbidden-credential", "$.redirect_uri", "remove it"},
		{"unknown-field", "unknown-field", "$.descripton", "spelling"},
		{"auth-type-enum", "auth-type-enum", "$.auth.type", "api_key, oauth2, password, none"},
		{"delivery-enum", "delivery-enum", "$.auth.delivery", "header, query or cookie"},
		{"param-missing", "required", "$.auth.param", "auth.param"},
		{"oauth-provider-missing", "required", "$.auth.provider", "provider slug"},
		{"oauth-provider-url", "provider-slug", "$.auth.provider", "not a URL"},
		{"field-not-secret", "field-not-secret", "$.auth.field", `"secret": true`},
		{"field-undeclared", "field-undeclared", "$.auth.field", "NOTES_KEY"},
		{"mode-enum", "mode-enum", "$.auth.modes[1]", "apiKey"},
		{"verify-timeout", "verify-timeout", "$.verify.timeout_secs", "1 to 300"},
		{"verify-expect", "verify-expect", "$.verify.probe.expect", "2xx"},
		{"verify-empty", "verify-empty", "$.verify", "command"},
		{"icon-missing", "file-missing", "$.icons.large", "icon-256.svg"},
		{"icon-type", "icon-type", "$.icons.small", ".svg or .png"},
		{"docs-llm-missing", "required", "$.docs.llm_short_description", "description"},
		{"docs-language", "docs-language", "$.docs.translations.German", "BCP 47"},
		{"guide-missing", "file-missing", "$.docs.translations.de.guide", "guide.fr.md"},
		{"placeholder-undeclared", "placeholder-undeclared", "$.base_url", `declare "NOTES_HOST"`},
		{"placeholder-key", "placeholder-deprecated", "$.auth.format", "{SECRET:NOTES_TOKEN}"},
		{"placeholder-env-lower", "placeholder-deprecated", "$.base_url", "{ENV:NOTES_URL}"},
		{"placeholder-secrets-dir", "placeholder-deprecated", "$.verify.command[2]", "{SECRET:NAME}"},
		{"placeholder-malformed", "placeholder-malformed", "$.auth.format", "closing brace"},
		{"json-type", "json-type", "$.version", "string"},
		{"json-invalid", "json-invalid", "$", "JSON object"},
		{"tag-format", "tag-format", "$.tags[2]", `"note-taking"`},
		{"mcp-remote-url-missing", "required", "$.mcp_config.url", "Streamable HTTP"},
		{"openapi-missing", "required", "$.openapi", "OpenAPI description"},
		{"mapping-missing", "file-missing", "$.mapping", "entities.json"},
	}
	rules := map[string]bool{}
	for _, tt := range tests {
		rules[tt.rule+" "+tt.path] = true
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			var errs []registry.Finding
			for _, f := range lintFixture(t, tt.fixture) {
				if f.Severity == registry.SeverityError {
					errs = append(errs, f)
				}
			}
			if len(errs) != 1 {
				t.Fatalf("want one error, got %d: %v", len(errs), errs)
			}
			f := errs[0]
			if f.Rule != tt.rule || f.Path != tt.path {
				t.Fatalf("got %s at %s (%s), want %s at %s", f.Rule, f.Path, f.Message, tt.rule, tt.path)
			}
			if f.File != "connector.json" || f.Message == "" || !strings.Contains(f.Fix, tt.fix) {
				t.Fatalf("finding %+v: want file connector.json, a message and a fix mentioning %q", f, tt.fix)
			}
			if s := f.String(); !strings.Contains(s, tt.path) || !strings.Contains(s, "fix: ") {
				t.Fatalf("String() = %q", s)
			}
		})
	}
	if len(rules) < 15 {
		t.Fatalf("only %d distinct defects", len(rules))
	}
}

// TestLintManifestWithoutFiles skips file checks when files is nil and
// the folder check when folder is empty.
func TestLintManifestWithoutFiles(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"icon-missing", "id-folder"} {
		raw, err := os.ReadFile(filepath.Join("testdata", "lint", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if got := registry.LintManifest(raw, "", nil); len(got) != 0 {
			t.Errorf("%s: %v", name, got)
		}
	}
}

// TestLintManifestNeverEchoesSecretValues: a forbidden credential's value
// is never quoted.
func TestLintManifestNeverEchoesSecretValues(t *testing.T) {
	t.Parallel()
	for _, f := range lintFixture(t, "forbidden-client-secret") {
		if strings.Contains(f.String(), "s3cr3t") {
			t.Fatalf("finding quotes the value: %v", f)
		}
	}
}
