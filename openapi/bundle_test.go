package openapi_test

import (
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/openapi"
)

// TestBundleMultiFile (issue 14 class 2): a description split over sibling
// files, one reference to a #/fragment of another file, is bundled into
// one document that compiles with every operation; a reference leaving
// the description's directory is refused.
func TestBundleMultiFile(t *testing.T) {
	t.Parallel()
	b, err := openapi.Bundle("testdata/multifile/root.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), ".yaml") {
		t.Errorf("the bundle still refers to files: %.400s", b)
	}
	r, err := openapi.Analyze(b, nil)
	if err != nil {
		t.Fatalf("the bundle does not compile: %v", err)
	}
	for _, id := range []string{"listThings", "createThing"} {
		op := operation(t, r, id)
		if id == "createThing" {
			if err := op.Validate(map[string]any{"body": map[string]any{"name": "x", "size": 0}}); err == nil || !strings.Contains(err.Error(), "minimum 1") {
				t.Errorf("the fragment's schema was not bundled: %v", err)
			}
		}
	}
	if _, err := openapi.Bundle("testdata/escape/root.yaml"); err == nil || !strings.Contains(err.Error(), "outside its directory") {
		t.Errorf("a reference out of the directory: %v", err)
	}
}
