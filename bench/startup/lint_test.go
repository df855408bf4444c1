package main

import (
	"testing"

	"github.com/switchboardhq/switchboard/registry"
)

// TestManifestLintsClean: serve refuses a connector whose manifest has
// lint errors, so the benchmark's manifests must have none.
func TestManifestLintsClean(t *testing.T) {
	for _, f := range registry.LintManifest(manifest("small-00", "Small 0", "openapi.json"), "small-00", []string{"connector.json", "openapi.json"}) {
		if f.Severity == registry.SeverityError {
			t.Errorf("lint error: %s: %s", f.Path, f.Message)
		}
	}
}
