package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
