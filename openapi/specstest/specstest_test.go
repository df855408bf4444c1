package specstest

import (
	"os"
	"path/filepath"
	"testing"
)

// The descriptions are found beside the module root, from any package
// directory below it, and only there.
func TestFindsSpecsBesideTheModuleRootOnly(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "repo")
	pkg := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := moduleRoot(pkg)
	if err != nil || got != root {
		t.Fatalf("moduleRoot = %q, %v; want %q", got, err, root)
	}
	// A specs directory elsewhere (inside the module, two levels up) is
	// not looked at.
	if err := os.MkdirAll(filepath.Join(root, "shared", "specs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := specsBeside(root); err == nil {
		t.Fatal("found specs that are not at ../shared/specs")
	}
	want := filepath.Join(base, "shared", "specs")
	if err := os.MkdirAll(want, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := specsBeside(root); err != nil || got != want {
		t.Fatalf("specsBeside = %q, %v; want %q", got, err, want)
	}
}
