package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
)

// vendorDescription is the small description the README workflow test
// generates a connector from.
const vendorDescription = `openapi: 3.0.3
info: {title: Acme Tickets, version: "1"}
servers: [{url: "https://api.acme.example/v1"}]
components:
  securitySchemes:
    key: {type: apiKey, in: header, name: X-Api-Key}
security: [{key: []}]
paths:
  /tickets:
    get:
      operationId: listTickets
      summary: List tickets
      responses: {"200": {description: ok}}
    post:
      operationId: createTicket
      summary: Create a ticket
      requestBody: {content: {application/json: {schema: {type: object, properties: {title: {type: string}}, required: [title]}}}}
      responses: {"201": {description: created}}
  /tickets/{id}:
    get:
      operationId: getTicket
      summary: Get a ticket
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
`

// catSubst matches a quoted command substitution reading a file.
var catSubst = regexp.MustCompile(`"\$\(cat ([^)\s]+)\)"`)

// readmeConnectorCommands returns the commands of README.md's Connectors
// block, each as its argument list after "switchboard".
func readmeConnectorCommands(t *testing.T) [][]string {
	t.Helper()
	var cmds [][]string
	for _, line := range strings.Split(readmeShBlock(t, "Connectors"), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		// "$(cat FILE)" stays one argument.
		fields := strings.Fields(catSubst.ReplaceAllString(line, "@cat:$1"))
		if fields[0] != "switchboard" {
			t.Fatalf("README command %q does not start with switchboard", line)
		}
		cmds = append(cmds, fields[1:])
	}
	return cmds
}

// The README's connector workflow works as written: generate, lint,
// index, hash, keygen, sign and verify, in a directory holding only the
// vendor's description; the catalog then loads with every required index
// field and serves the connector.
func TestREADMEConnectorWorkflow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vendor-openapi.yaml"), []byte(vendorDescription), 0o644); err != nil {
		t.Fatal(err)
	}
	cmds := readmeConnectorCommands(t)
	if len(cmds) < 5 {
		t.Fatalf("only %d commands in the README block", len(cmds))
	}
	for _, args := range cmds {
		// Paths are relative to the working directory: make them relative
		// to dir; "$(cat FILE)" is the file's content.
		resolved := append([]string(nil), args[:2]...)
		for _, a := range args[2:] {
			switch {
			case strings.HasPrefix(a, "-"):
				resolved = append(resolved, a)
			case strings.HasPrefix(a, "@cat:"):
				b, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(a, "@cat:")))
				if err != nil {
					t.Fatal(err)
				}
				resolved = append(resolved, strings.TrimSpace(string(b)))
			default:
				resolved = append(resolved, filepath.Join(dir, a))
			}
		}
		var out, errOut bytes.Buffer
		if err := run(context.Background(), resolved, envMap(nil), &out, &errOut); err != nil {
			t.Fatalf("switchboard %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
	}

	catDir := filepath.Join(dir, "connectors")
	idx, err := registry.ReadIndex(os.DirFS(catDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Connectors) != 1 {
		t.Fatalf("index has %d connectors", len(idx.Connectors))
	}
	e := idx.Connectors[0]
	if e.ID != "vendor" || e.Folder != "vendor" || e.Name == "" || e.Type != registry.TypeOpenAPI || e.Scope == "" || e.Auth.Type == "" || len(e.Files) < 3 {
		b, _ := json.Marshal(e)
		t.Fatalf("index entry misses required fields: %s", b)
	}
	cat, err := registry.LoadCatalogWith(os.DirFS(catDir), openapi.Compile, registry.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := cat.Problems(); len(p) > 0 {
		t.Fatalf("the generated catalog has problems: %v", p)
	}
	conn, ok := cat.Connector("vendor")
	if !ok || conn.Spec == nil || len(conn.Spec.Entities) == 0 {
		t.Fatal("the generated connector did not load with its tools")
	}

	// Indexing again changes nothing; a second connector is added.
	before, _ := os.ReadFile(filepath.Join(catDir, registry.IndexName))
	if err := run(context.Background(), []string{"connector", "index", catDir}, envMap(nil), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(catDir, registry.IndexName)); !bytes.Equal(before, after) {
		t.Fatal("indexing an indexed catalog rewrote it")
	}
}

// A package whose id differs from its folder is refused by lint and by
// index, with the fix named; generate names the connector after its
// folder.
func TestConnectorIDFolderMismatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "vendor-openapi.yaml")
	if err := os.WriteFile(spec, []byte(vendorDescription), 0o644); err != nil {
		t.Fatal(err)
	}
	cat := filepath.Join(dir, "connectors")
	var out bytes.Buffer
	err := run(context.Background(), []string{"connector", "generate", "--spec", spec, "--id", "acme", "--out", filepath.Join(cat, "vendor")}, envMap(nil), &out, io.Discard)
	if err == nil || !strings.Contains(out.String(), "does not equal the folder") {
		t.Fatalf("generate --id acme --out .../vendor = %v:\n%s", err, out.String())
	}
	if _, err := os.Stat(filepath.Join(cat, "vendor", "connector.json")); err == nil {
		t.Fatal("generate wrote a package its lint rejects")
	}
	// A package moved to another folder after generate.
	if err := run(context.Background(), []string{"connector", "generate", "--spec", spec, "--out", filepath.Join(cat, "acme")}, envMap(nil), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(cat, "acme"), filepath.Join(cat, "vendor")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(context.Background(), []string{"connector", "lint", filepath.Join(cat, "vendor")}, envMap(nil), &out, io.Discard)
	if err == nil || !strings.Contains(out.String(), "does not equal the folder") {
		t.Fatalf("lint of a mismatched package = %v:\n%s", err, out.String())
	}
	err = run(context.Background(), []string{"connector", "index", cat}, envMap(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "does not equal the folder name") {
		t.Fatalf("index of a mismatched package = %v", err)
	}
	if _, err := os.Stat(filepath.Join(cat, registry.IndexName)); err == nil {
		t.Fatal("index wrote connectors.json despite the mismatch")
	}
	err = run(context.Background(), []string{"connector", "hash", cat}, envMap(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "connector index") {
		t.Fatalf("hash without an index = %v; want it to point at connector index", err)
	}
}
