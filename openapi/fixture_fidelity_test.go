package openapi_test

import (
	"testing"

	"github.com/switchboardhq/switchboard/openapi/fidelity"
	"github.com/switchboardhq/switchboard/registry"
)

// TestFixtureFidelity runs the vendor fidelity check on the project's own
// fixtures, which hold every construct of issue 4 §2-§4: every operation's
// request must validate against its description.
func TestFixtureFidelity(t *testing.T) {
	t.Parallel()
	d := &registry.Dispatcher{Client: fidelity.LoopbackClient()}
	for _, tt := range []struct {
		file string
		ops  int // operations the registry holds
	}{
		{"testdata/kitchen.yaml", 9},
		{"testdata/swagger2.json", 3},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			o := exercise(t, compileFile(t, tt.file), dispatch(t, d))
			report(t, tt.file, o, tt.ops)
			if len(o.Failures) > 0 {
				t.Errorf("%d requests do not validate", len(o.Failures))
			}
		})
	}
}
