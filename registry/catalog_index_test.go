package registry_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboardhq/switchboard/registry"
)

// IndexCatalog derives from the manifests exactly the index the built-in
// catalog maintains, creates it when missing, and drops an entry whose
// folder is gone.
func TestIndexCatalogMatchesTheBuiltinIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../catalog/builtin")); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, registry.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	changes, err := registry.IndexCatalog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, registry.IndexName)); !bytes.Equal(got, want) || len(changes.Added) > 0 {
		t.Fatalf("IndexCatalog changed the built-in index (%+v):\n%s", changes, got)
	}
	// From nothing: the same entries (in id order).
	if err := os.Remove(filepath.Join(dir, registry.IndexName)); err != nil {
		t.Fatal(err)
	}
	if changes, err = registry.IndexCatalog(dir); err != nil || len(changes.Added) == 0 {
		t.Fatalf("IndexCatalog without an index = %+v, %v", changes, err)
	}
	idx, err := registry.ReadIndex(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := registry.ReadIndex(os.DirFS("../catalog/builtin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Connectors) != len(builtin.Connectors) {
		t.Fatalf("%d connectors indexed, want %d", len(idx.Connectors), len(builtin.Connectors))
	}
	// A removed folder drops its entry.
	gone := idx.Connectors[0].ID
	if err := os.RemoveAll(filepath.Join(dir, gone)); err != nil {
		t.Fatal(err)
	}
	changes, err = registry.IndexCatalog(dir)
	if err != nil || len(changes.Removed) != 1 || changes.Removed[0] != gone {
		t.Fatalf("after removing %s: %+v, %v", gone, changes, err)
	}
}
