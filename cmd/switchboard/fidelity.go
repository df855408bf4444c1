package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/fidelity"
	"github.com/switchboardhq/switchboard/registry"
)

// connectorFidelity compiles a description in memory, calls each of its
// operations with synthesised arguments through the registry's request
// building against a loopback upstream that validates every request with
// kin-openapi, and prints the results and a summary.
func connectorFidelity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connector fidelity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("spec", "", "the vendor's OpenAPI description (JSON or YAML; OpenAPI 3.0, 3.1 or Swagger 2.0)")
	sample := fs.Int("sample", 0, "print N operations picked at random (0: all); the summary covers all")
	seed := fs.Uint64("seed", 1, "the seed of --sample")
	viaMCP := fs.Bool("mcp", false, "call each operation with MCP tools/call through a server built in process (embedded store in a temporary directory, loopback only) instead of the registry's request building alone")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *spec == "" || fs.NArg() > 0 || *sample < 0 {
		fs.Usage()
		return errors.New("connector fidelity: --spec is required (and --sample is not negative)")
	}
	b, err := os.ReadFile(*spec)
	if err != nil {
		return fmt.Errorf("connector fidelity: %w", err)
	}
	res, err := openapi.Analyze(b, nil)
	if err != nil {
		return fmt.Errorf("connector fidelity: %w", err)
	}
	fidelity.IndexedArrays(res.Doc)
	var o fidelity.Outcome
	if *viaMCP {
		m := &mcpFidelity{}
		defer m.close()
		o = fidelity.Run(res.Spec, res.Doc, m.sender(ctx, b, filepath.Base(*spec)))
		fmt.Fprintf(stdout, "fidelity of %s: MCP path (tools/call through a server built in process to an in-process kin-openapi validating upstream on loopback)\n\n", *spec)
	} else {
		d := &registry.Dispatcher{Client: fidelity.LoopbackClient()}
		o = fidelity.Run(res.Spec, res.Doc, fidelity.Dispatch(ctx, d))
		fmt.Fprintf(stdout, "fidelity of %s: direct path (the registry's request building to an in-process kin-openapi validating upstream on loopback; not through MCP)\n\n", *spec)
	}
	if err := fidelity.WriteTable(stdout, fidelity.Sample(o.Results, *sample, *seed)); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	return fidelity.WriteSummary(stdout, fidelity.DescriptionOperations(res.Doc), o)
}
