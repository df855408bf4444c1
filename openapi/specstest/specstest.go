// Package specstest finds the shared vendor OpenAPI descriptions for tests:
// the directory ../shared/specs beside the module root, and nowhere else.
// They are never copied into the repository.
//
// When the directory is missing a test is skipped, except under CI=true,
// where it fails: CI must never pass by skipping what it should test.
package specstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Rel is where the descriptions are, relative to the module root.
const Rel = "../shared/specs"

// Dir returns the shared descriptions' directory, or skips the test (fails
// it under CI=true) when it is missing.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := find()
	if err == nil {
		return dir
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the vendor descriptions are required when CI=true: %v", err)
	}
	t.Skipf("vendor descriptions not tested: %v", err)
	return ""
}

// Path returns the path of one shared description, as Dir.
func Path(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Dir(t), name)
}

// Read returns the content of one shared description, as Dir; a
// description that cannot be read fails the test.
func Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// find looks for Rel from the root of the module of the working directory.
func find() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := moduleRoot(wd)
	if err != nil {
		return "", err
	}
	return specsBeside(root)
}

// moduleRoot is the nearest directory at or above dir holding go.mod.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
	}
}

// specsBeside returns root/Rel when it is a directory.
func specsBeside(root string) (string, error) {
	dir := filepath.Join(root, filepath.FromSlash(Rel))
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("%s (beside the module root) not found: %w", Rel, err)
	}
	if !st.IsDir() {
		return "", errors.New(Rel + " is not a directory")
	}
	return dir, nil
}
