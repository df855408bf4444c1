package main

import (
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/openapi/specstest"
)

// The fidelity command on the kitchen fixture: every imported operation is
// called and validates, and the summary counts what the description holds.
func TestConnectorFidelityFixture(t *testing.T) {
	t.Parallel()
	out, errOut, err := runCmd(t, "connector", "fidelity", "--spec", "../../openapi/testdata/kitchen.yaml")
	if err != nil {
		t.Fatalf("connector fidelity: %v\n%s", err, errOut)
	}
	want := "summary: 10 operations in the description, 9 imported (90.0%), 9 of 9 called valid (100.0%), 0 skipped\n"
	if !strings.HasSuffix(out, want) {
		t.Fatalf("output does not end with %q:\n%s", want, out)
	}
	if !strings.Contains(out, "direct path") || !strings.Contains(out, "\ncreatePet ") {
		t.Errorf("the header or the per-operation table is missing:\n%s", out)
	}
	if got := strings.Count(out, "  ok  "); got != 9 {
		t.Errorf("%d rows ok, want 9:\n%s", got, out)
	}

	// --sample limits the table, not the summary, and the seed makes the
	// pick reproducible.
	a, _, err := runCmd(t, "connector", "fidelity", "--spec", "../../openapi/testdata/kitchen.yaml", "--sample", "2", "--seed", "3")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := runCmd(t, "connector", "fidelity", "--spec", "../../openapi/testdata/kitchen.yaml", "--sample", "2", "--seed", "3")
	if got := strings.Count(a, "  ok  "); got != 2 || a != b || !strings.HasSuffix(a, want) {
		t.Errorf("--sample 2: %d rows, same output twice %v:\n%s", got, a == b, a)
	}

	if _, _, err := runCmd(t, "connector", "fidelity"); err == nil || !strings.Contains(err.Error(), "--spec is required") {
		t.Errorf("without --spec: %v", err)
	}
	if _, _, err := runCmd(t, "connector", "fidelity", "--spec", "../../openapi/testdata/nodescription.yaml", "--sample", "-1"); err == nil {
		t.Errorf("a negative --sample is accepted")
	}
	help, _, _ := runCmd(t, "connector", "help")
	if !strings.Contains(help, "fidelity --spec FILE") {
		t.Errorf("connector help does not list fidelity:\n%s", help)
	}
}

// --mcp calls each operation with MCP tools/call through a server built in
// process; a description whose base URL cannot be aimed at the upstream
// (server variables in the host) is skipped, not counted.
func TestConnectorFidelityMCP(t *testing.T) {
	t.Parallel()
	out, errOut, err := runCmd(t, "connector", "fidelity", "--mcp", "--spec", "../../openapi/testdata/swagger2.json")
	if err != nil {
		t.Fatalf("connector fidelity --mcp: %v\n%s", err, errOut)
	}
	want := "summary: 3 operations in the description, 3 imported (100.0%), 3 of 3 called valid (100.0%), 0 skipped\n"
	if !strings.Contains(out, "MCP path") || !strings.HasSuffix(out, want) {
		t.Fatalf("output does not name the MCP path or end with %q:\n%s", want, out)
	}
	out, _, err = runCmd(t, "connector", "fidelity", "--mcp", "--spec", "../../openapi/testdata/kitchen.yaml")
	want = "summary: 10 operations in the description, 9 imported (90.0%), 0 of 0 called valid (n/a), 9 skipped\n" +
		"     9  not aimed at the upstream (not called)\n"
	if err != nil || !strings.HasSuffix(out, want) {
		t.Fatalf("kitchen --mcp: %v, output does not end with %q:\n%s", err, want, out)
	}
}

// The fidelity command on a shared vendor description (fails under CI=true
// when the descriptions are missing).
func TestConnectorFidelityShared(t *testing.T) {
	t.Parallel()
	want := "summary: 174 operations in the description, 174 imported (100.0%), 174 of 174 called valid (100.0%), 0 skipped\n"
	for _, path := range []string{"", "--mcp"} {
		args := []string{"connector", "fidelity", "--spec", specstest.Path(t, "slack.json"), "--sample", "5"}
		if path != "" {
			args = append(args, path)
		}
		out, errOut, err := runCmd(t, args...)
		if err != nil {
			t.Fatalf("connector fidelity %s: %v\n%s", path, err, errOut)
		}
		if !strings.HasSuffix(out, want) || strings.Count(out, "  ok  ") != 5 {
			t.Fatalf("%s: output does not end with %q or has not 5 rows:\n%s", path, want, out)
		}
	}
}
