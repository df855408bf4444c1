package registry_test

import (
	"os"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
)

const thingsSpec = `{
  "openapi": "3.0.3", "info": {"title": "Things", "version": "1"},
  "servers": [{"url": "https://things.example.test"}],
  "paths": {"/things": {
    "get": {"operationId": "listThings", "x-entity": "things", "x-action": "list", "responses": {"200": {"description": "ok"}}},
    "post": {"operationId": "createThing", "x-entity": "things", "x-action": "create", "responses": {"201": {"description": "ok"}}}
  }}
}`

const thingsView = "<!doctype html>\n<html lang=\"en\">\n<head>\n<title>Things</title>\n</head><body><script>1</script></body></html>\n"

// thingsApp is the "apps" member of the things connector, with the
// replacements in edits applied to its default declaration.
func thingsApp(edits ...string) string {
	app := `{"uri": "ui://things/table", "name": "Things", "file": "view.html", "mime_type": "text/html;profile=mcp-app",
	  "tool": "things", "bridge": {"name": "things_read", "tool": "things", "actions": ["list"]},
	  "csp": {"connectDomains": ["https://api.things.example"], "resourceDomains": ["https://*.cdn.example:8443"]}}`
	return strings.NewReplacer(edits...).Replace(app)
}

func loadThings(t *testing.T, app string, view string) *registry.Catalog {
	t.Helper()
	files := map[string]string{
		"things/connector.json": `{"id": "things", "name": "Things", "version": "1.0.0", "type": "openapi", "scope": "global",
		  "auth": {"type": "none", "modes": []}, "openapi": "openapi.json", "apps": [` + app + `]}`,
		"things/openapi.json": thingsSpec,
		"things/view.html":    view,
	}
	cat, err := registry.LoadCatalog(os.DirFS(registrytest.Write(t, files)), openapi.Compile)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func TestCompileApps(t *testing.T) {
	t.Parallel()
	cat := loadThings(t, thingsApp(), thingsView)
	if p := cat.Problems(); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	conn, _ := cat.Connector("things")
	if len(conn.Apps) != 1 {
		t.Fatalf("apps = %v", conn.Apps)
	}
	app := conn.Apps[0]
	want := "default-src 'none'; script-src 'unsafe-inline' https://*.cdn.example:8443; style-src 'unsafe-inline' https://*.cdn.example:8443; " +
		"img-src data: https://*.cdn.example:8443; font-src https://*.cdn.example:8443; media-src data: https://*.cdn.example:8443; " +
		"connect-src https://api.things.example; frame-src 'none'; base-uri 'none'; object-src 'none'; form-action 'none'"
	if app.Policy != want {
		t.Errorf("policy\n got %s\nwant %s", app.Policy, want)
	}
	if !strings.HasPrefix(app.HTML, "<!doctype html>\n<html lang=\"en\">\n<head><meta http-equiv=\"Content-Security-Policy\" content=\""+want+"\">\n<title>") {
		t.Errorf("the policy is not the head's first element:\n%s", app.HTML)
	}
	if _, ok := app.BridgeActions["list"]; !ok || len(app.BridgeActions) != 1 {
		t.Errorf("bridge actions = %v", app.BridgeActions)
	}
}

func TestCompileAppsRefusesBadDeclarations(t *testing.T) {
	t.Parallel()
	big := "<!doctype html><head></head>" + strings.Repeat("x", registry.MaxAppBytes)
	tests := []struct {
		name, app, view, field string
	}{
		{"wrong scheme", thingsApp(`"ui://things/table"`, `"https://things/table"`), thingsView, "apps[0].uri"},
		{"other connector", thingsApp(`"ui://things/table"`, `"ui://others/table"`), thingsView, "apps[0].uri"},
		{"no name in uri", thingsApp(`"ui://things/table"`, `"ui://things"`), thingsView, "apps[0].uri"},
		{"not html media type", thingsApp(`"text/html;profile=mcp-app"`, `"text/html"`), thingsView, "apps[0].mime_type"},
		{"unknown file", thingsApp(`"view.html"`, `"missing.html"`), thingsView, "apps[0].file"},
		{"not an html document", thingsApp(), "<p>hello</p>", "apps[0].file"},
		{"script before head", thingsApp(), "<!doctype html><script>steal()</script><head></head>", "apps[0].file"},
		{"oversized", thingsApp(), big, "apps[0].file"},
		{"unknown tool", thingsApp(`"tool": "things"`, `"tool": "nothing"`), thingsView, "apps[0].tool"},
		{"bridge named as an entity", thingsApp(`"things_read"`, `"things"`), thingsView, "apps[0].bridge.name"},
		{"bridge of a write", thingsApp(`"actions": ["list"]`, `"actions": ["list", "create"]`), thingsView, "apps[0].bridge.actions[1]"},
		{"bridge of an unknown action", thingsApp(`"actions": ["list"]`, `"actions": ["delete"]`), thingsView, "apps[0].bridge.actions[0]"},
		{"http source", thingsApp(`"https://api.things.example"`, `"http://api.things.example"`), thingsView, "apps[0].csp.connectDomains[0]"},
		{"source with a path", thingsApp(`"https://api.things.example"`, `"https://api.things.example/v1"`), thingsView, "apps[0].csp.connectDomains[0]"},
		{"source breaking out", thingsApp(`"https://*.cdn.example:8443"`, `"https://a.example; script-src *"`), thingsView, "apps[0].csp.resourceDomains[0]"},
		{"keyword source", thingsApp(`"https://*.cdn.example:8443"`, `"'unsafe-eval'"`), thingsView, "apps[0].csp.resourceDomains[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cat := loadThings(t, tc.app, tc.view)
			if _, ok := cat.Connector("things"); ok {
				t.Fatal("the connector was loaded")
			}
			p := cat.Problems()
			if len(p) != 1 {
				t.Fatalf("problems = %v", p)
			}
			if code := switchboard.CodeOf(p[0]); code != "connector_app_invalid" {
				t.Errorf("code = %q (%v)", code, p[0])
			}
			if !strings.Contains(p[0].Error(), tc.field+":") {
				t.Errorf("%v does not name %s", p[0], tc.field)
			}
		})
	}
}

// TestLintApps: connector lint reports what it can tell of a view from
// the manifest and the file list, at the field's JSON path.
func TestLintApps(t *testing.T) {
	t.Parallel()
	manifest := func(app string) []byte {
		return []byte(`{"id": "things", "name": "Things", "version": "1.0.0", "type": "openapi", "scope": "global",
		  "user_description": "Things.", "docs": {"llm_short_description": "Things."},
		  "auth": {"type": "none", "modes": []}, "openapi": "openapi.json", "apps": [` + app + `]}`)
	}
	files := []string{"connector.json", "openapi.json", "view.html"}
	errs := func(app string, files []string) []registry.Finding {
		var out []registry.Finding
		for _, f := range registry.LintManifest(manifest(app), "things", files) {
			if f.Severity == registry.SeverityError {
				out = append(out, f)
			}
		}
		return out
	}
	if got := errs(thingsApp(), files); len(got) != 0 {
		t.Fatalf("a good view has lint errors: %v", got)
	}
	for _, tc := range []struct {
		name, app  string
		files      []string
		rule, path string
	}{
		{"csp source", thingsApp(`"https://api.things.example"`, `"http://127.0.0.1:9"`), files, "app-invalid", "$.apps[0].csp.connectDomains[0]"},
		{"uri", thingsApp(`"ui://things/table"`, `"ui://other/table"`), files, "app-invalid", "$.apps[0].uri"},
		{"unknown member", thingsApp(`"file":`, `"html":`), files, "unknown-field", "$.apps[].html"},
		{"file not in the package", thingsApp(), files[:2], "file-missing", "$.apps[0].file"},
	} {
		got := errs(tc.app, tc.files)
		if len(got) == 0 || got[0].Rule != tc.rule || got[0].Path != tc.path {
			t.Errorf("%s: lint errors %v, want %s at %s first", tc.name, got, tc.rule, tc.path)
		}
	}
}
