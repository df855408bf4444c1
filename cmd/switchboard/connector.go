package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/openapi"
)

const connectorUsage = `usage: switchboard connector <subcommand> [flags]

subcommands:
  generate --spec FILE [--mapping FILE] [--id ID] --out DIR
            write a connector package (connector.json, mapping.json and the
            description) generated from a vendor OpenAPI description
  lint [--json] DIR
            check a connector package (its id must equal the folder name);
            exits non-zero on errors
  fidelity --spec FILE [--sample N] [--seed S] [--mcp]
            call every operation of a description with synthesised
            arguments against an in-process validating mock (loopback
            only) and print per-operation results and a summary; --mcp
            calls through MCP tools/call to a server built in process
`

// errLintFailed reports that lint or generate found errors; they have
// been printed already.
var errLintFailed = errors.New("the connector package has errors")

// runConnector runs "switchboard connector <subcommand>".
func runConnector(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, connectorUsage)
		return errors.New("connector: no subcommand given")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "generate":
		return connectorGenerate(ctx, rest, stdout, stderr)
	case "lint":
		return connectorLint(ctx, rest, stdout, stderr)
	case "fidelity":
		return connectorFidelity(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, connectorUsage+catalogUsage)
		return nil
	default:
		if ok, err := runCatalogCommand(ctx, sub, rest, stdout, stderr); ok {
			return err
		}
		fmt.Fprint(stderr, connectorUsage+catalogUsage)
		return fmt.Errorf("connector: unknown subcommand %q", sub)
	}
}

// connectorGenerate lints the package, then writes it when lint finds no
// error.
func connectorGenerate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connector generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("spec", "", "the vendor's OpenAPI description (JSON or YAML; OpenAPI 3.0, 3.1 or Swagger 2.0)")
	mapping := fs.String("mapping", "", "an entity mapping file (optional; default grouping otherwise)")
	id := fs.String("id", "", "the connector id; it must equal the --out folder's name (default: that name)")
	out := fs.String("out", "", "the directory to write the package to")
	desc := fs.String("description", "", "the connector's description (default: the description's info.description, or one derived from its title and tools)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *spec == "" || *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("connector generate: --spec and --out are required")
	}
	specBytes, err := os.ReadFile(*spec)
	if err != nil {
		return fmt.Errorf("connector generate: %w", err)
	}
	var mapBytes []byte
	if *mapping != "" {
		if mapBytes, err = os.ReadFile(*mapping); err != nil {
			return fmt.Errorf("connector generate: %w", err)
		}
	}
	// The catalog index requires id == folder name, so the folder names
	// the connector unless --id says otherwise (and lint then objects).
	folder := filepath.Base(filepath.Clean(*out))
	if *id == "" && switchboard.ValidSlug(folder) && folder[0] >= 'a' && folder[0] <= 'z' {
		*id = folder
	}
	specName := filepath.Base(*spec)
	pkg, err := openapi.Generate(specBytes, mapBytes, openapi.GenerateOptions{ID: *id, SpecName: specName, Description: *desc})
	if switchboard.CodeOf(err) == "external_reference" {
		// A description split over files: bundle the local ones (never a
		// URL, never outside the description's directory) into the one
		// file the package stores.
		if specBytes, err = openapi.Bundle(*spec); err != nil {
			return fmt.Errorf("connector generate: %w", err)
		}
		sum := sha256.Sum256(specBytes)
		fmt.Fprintf(stdout, "bundled %s and the files it refers to into one description (%d bytes, sha256 %s)\n", *spec, len(specBytes), hex.EncodeToString(sum[:]))
		pkg, err = openapi.Generate(specBytes, mapBytes, openapi.GenerateOptions{ID: *id, SpecName: "openapi.json", Description: *desc})
	}
	if err != nil {
		return fmt.Errorf("connector generate: %w", err)
	}
	// Never write a package its own lint (and so serve) rejects.
	findings := pkg.LintIn(folder)
	if slices.ContainsFunc(findings, func(f openapi.Finding) bool { return f.Severity == openapi.SeverityError }) {
		fmt.Fprintf(stderr, "connector generate: nothing written to %s: the package would not lint clean\n", *out)
		return printFindings(findings, false, stdout, stderr)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("connector generate: %w", err)
	}
	names := make([]string, 0, len(pkg.Files))
	for name := range pkg.Files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(*out, name), pkg.Files[name], 0o644); err != nil {
			return fmt.Errorf("connector generate: %w", err)
		}
	}
	api := pkg.Result.Spec
	ops := 0
	for _, e := range api.Entities {
		ops += len(e.Actions)
	}
	fmt.Fprintf(stdout, "wrote %s: %d tools, %d actions, tools/list at most %d bytes as a client receives it\n", *out, len(api.Entities), ops, openapi.ToolsListBound(api))
	return printFindings(findings, false, stdout, stderr)
}

// connectorLint lints a package directory.
func connectorLint(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connector lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the findings as a JSON array")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("connector lint: give one package directory")
	}
	dir := fs.Arg(0)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("connector lint: %s is not a directory", dir)
	}
	return printFindings(openapi.LintPackageIn(os.DirFS(dir), filepath.Base(filepath.Clean(dir))), *asJSON, stdout, stderr)
}

// printFindings prints findings, one a line (or as JSON), and a count;
// errors make it return errLintFailed.
func printFindings(findings []openapi.Finding, asJSON bool, stdout, stderr io.Writer) error {
	errs, warns := 0, 0
	for _, f := range findings {
		if f.Severity == openapi.SeverityError {
			errs++
		} else {
			warns++
		}
	}
	if asJSON {
		if findings == nil {
			findings = []openapi.Finding{}
		}
		b, err := json.MarshalIndent(findings, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		for _, f := range findings {
			fmt.Fprintln(stdout, f.String())
		}
		fmt.Fprintf(stdout, "%d errors, %d warnings\n", errs, warns)
	}
	if errs > 0 {
		fmt.Fprintf(stderr, "%d errors\n", errs)
		return errLintFailed
	}
	return nil
}
