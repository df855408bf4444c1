package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/server"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
	return stdout.String() + stderr.String(), err
}

func TestConnectorGenerateAndLint(t *testing.T) {
	t.Parallel()
	spec := filepath.Join("..", "..", "openapi", "testdata", "kitchen.yaml")
	// Packages live in folders named after their id.
	a, b := filepath.Join(t.TempDir(), "kitchen"), filepath.Join(t.TempDir(), "kitchen")
	for _, dir := range []string{a, b} {
		out, err := runCLI(t, "connector", "generate", "--spec", spec, "--out", dir)
		if err != nil {
			t.Fatalf("generate: %v\n%s", err, out)
		}
		if !strings.Contains(out, "0 errors") || !strings.Contains(out, "tools/list") {
			t.Errorf("generate said %s", out)
		}
	}
	// Byte-identical across runs.
	for _, name := range []string{"connector.json", "mapping.json", "openapi.yaml"} {
		x, err1 := os.ReadFile(filepath.Join(a, name))
		y, err2 := os.ReadFile(filepath.Join(b, name))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between runs (%v %v)", name, err1, err2)
		}
	}
	out, err := runCLI(t, "connector", "lint", a)
	if err != nil || !strings.Contains(out, "0 errors") || !strings.Contains(out, "warning: openapi.yaml $.paths[") {
		t.Errorf("lint: %v\n%s", err, out)
	}
	out, err = runCLI(t, "connector", "lint", "--json", a)
	if err != nil || !strings.Contains(out, `"severity": "warning"`) {
		t.Errorf("lint --json: %v\n%s", err, out)
	}

	// An error makes lint fail, naming the JSON path.
	m, _ := os.ReadFile(filepath.Join(a, "connector.json"))
	m = bytes.Replace(m, []byte(`"field": "KITCHEN_API_KEY"`), []byte(`"field": "MISSING_KEY"`), 1)
	if err := os.WriteFile(filepath.Join(b, "connector.json"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "connector", "lint", b)
	if err == nil || !strings.Contains(out, "error: connector.json $.auth.field") {
		t.Errorf("lint of a broken package: %v\n%s", err, out)
	}

	for _, args := range [][]string{
		{"connector"},
		{"connector", "generate", "--spec", spec},
		{"connector", "lint"},
		{"connector", "lint", filepath.Join(a, "connector.json")},
		{"connector", "generate", "--spec", filepath.Join(a, "missing.yaml"), "--out", t.TempDir()},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v succeeded", args)
		}
	}
}

// TestGenerateLintsCleanServeRefusesLintErrors (issue 14 class 3): a
// description without info.description still gives a package that lints
// clean (a derived description, or --description), and serve's catalog
// loading refuses, by name, a package whose manifest has lint errors
// while loading the others.
func TestGenerateLintsCleanServeRefusesLintErrors(t *testing.T) {
	t.Parallel()
	spec := filepath.Join("..", "..", "openapi", "testdata", "nodescription.yaml")
	cat := t.TempDir()
	for _, tt := range []struct {
		id, want string
		flags    []string
	}{
		{"bare", "Bare: 1 operations on things.", nil},
		{"bare-given", "Things, listed.", []string{"--description", "Things, listed."}},
	} {
		out, err := runCLI(t, append([]string{"connector", "generate", "--spec", spec, "--out", filepath.Join(cat, tt.id)}, tt.flags...)...)
		if err != nil || !strings.Contains(out, "0 errors") {
			t.Fatalf("generate %s: %v\n%s", tt.id, err, out)
		}
		var m registry.Manifest
		b, _ := os.ReadFile(filepath.Join(cat, tt.id, "connector.json"))
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Description != tt.want || !strings.HasPrefix(m.Docs.LLMShortDescription, tt.want) {
			t.Errorf("%s: description %q, llm %q; want %q", tt.id, m.Description, m.Docs.LLMShortDescription, tt.want)
		}
	}
	// Break one package the way a hand edit would, and index the catalog.
	p := filepath.Join(cat, "bare-given", "connector.json")
	b, _ := os.ReadFile(p)
	b = regexp.MustCompile(`"llm_short_description": "[^"]*"`).ReplaceAll(b, []byte(`"llm_short_description": ""`))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "connector", "index", cat); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	c, _, err := server.LoadCatalog(context.Background(), server.Config{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Connector("bare"); !ok {
		t.Error("the clean package did not load")
	}
	if _, ok := c.Connector("bare-given"); ok {
		t.Error("a package with lint errors loaded")
	}
	problems := fmt.Sprint(c.Problems())
	if !strings.Contains(problems, `connector "bare-given" refused`) || !strings.Contains(problems, "llm_short_description") {
		t.Errorf("problems %s do not name the connector and its lint error", problems)
	}
}

// TestGenerateBundlesMultiFile (issue 14 class 2): generate --spec on the
// root of a description split over files bundles them into the package's
// one description, which lints clean and is named with its sha256.
func TestGenerateBundlesMultiFile(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "openapi", "testdata", "multifile", "root.yaml")
	out := filepath.Join(t.TempDir(), "multi")
	text, err := runCLI(t, "connector", "generate", "--spec", root, "--out", out)
	if err != nil || !strings.Contains(text, "bundled") || !strings.Contains(text, "sha256 ") || !strings.Contains(text, "0 errors") {
		t.Fatalf("generate: %v\n%s", err, text)
	}
	b, err := os.ReadFile(filepath.Join(out, "openapi.json"))
	if err != nil || strings.Contains(string(b), ".yaml") || !strings.Contains(string(b), "createThing") {
		t.Errorf("the package's description is not the bundle: %v %.200s", err, b)
	}
	escape := filepath.Join("..", "..", "openapi", "testdata", "escape", "root.yaml")
	if text, err := runCLI(t, "connector", "generate", "--spec", escape, "--out", filepath.Join(t.TempDir(), "escape")); err == nil || !strings.Contains(text+err.Error(), "outside its directory") {
		t.Errorf("generate of a description referring outside its directory: %v %s", err, text)
	}
}
