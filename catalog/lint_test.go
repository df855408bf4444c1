package catalog_test

import (
	"io/fs"
	"testing"

	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/registry"
)

// TestBuiltinManifestsLint: every built-in manifest passes the manifest
// lint without a finding, against the files its index entry lists.
func TestBuiltinManifestsLint(t *testing.T) {
	t.Parallel()
	idx, err := registry.ReadIndex(catalog.FS())
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Connectors) == 0 {
		t.Fatal("no built-in connectors")
	}
	for _, e := range idx.Connectors {
		raw, err := fs.ReadFile(catalog.FS(), e.Folder+"/"+registry.ManifestFile)
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, f := range e.Files {
			files = append(files, f.Path)
		}
		for _, f := range registry.LintManifest(raw, e.Folder, files) {
			t.Errorf("%s: %s", e.ID, f)
		}
	}
}
