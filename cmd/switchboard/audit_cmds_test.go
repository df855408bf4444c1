package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/tenants"
)

// switchboard audit export writes a tenant's rows, and only them, as
// NDJSON to a new file; it refuses to overwrite one. audit retain
// deletes the rows past --audit-retention-days.
func TestAuditExportAndRetainCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	// The first command migrates the embedded store.
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"audit", "retain", "--data-dir", dir}, envMap(nil), &out, &errOut); err != nil {
		t.Fatalf("audit retain on a new store: %v: %s", err, errOut.String())
	}
	db := openDataDir(t, dir)
	acme, err := tenants.NewStore(db, nil).CreateTenant(ctx, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var rows []audit.Entry
	for i := range 1500 {
		at := now.Add(-time.Minute)
		if i%3 == 0 {
			at = now.AddDate(0, 0, -100)
		}
		rows = append(rows, audit.Entry{ID: fmt.Sprintf("aud_cli%05d", i), Tenant: acme.ID, Time: at, Instance: "crm", Outcome: "ok"})
	}
	rows = append(rows, audit.Entry{ID: "aud_other", Tenant: "ten_other", Time: now, Instance: "crm", Outcome: "ok"})
	if err := audit.NewStore(db).Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "acme.ndjson")
	export := []string{"audit", "export", "--data-dir", dir, "--tenant", "acme", "--out", file}
	errOut.Reset()
	if err := run(ctx, export, envMap(nil), &out, &errOut); err != nil {
		t.Fatalf("audit export: %v: %s", err, errOut.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 1500 || strings.Contains(string(b), "aud_other") {
		t.Errorf("exported %d lines (want 1500), another tenant's row: %v", n, strings.Contains(string(b), "aud_other"))
	}
	if err := run(ctx, export, envMap(nil), &out, &errOut); err == nil {
		t.Error("a second export overwrote the file")
	}
	out.Reset()
	if err := run(ctx, []string{"audit", "retain", "--data-dir", dir, "--audit-retention-days", "30"}, envMap(nil), &out, &errOut); err != nil {
		t.Fatalf("audit retain: %v", err)
	}
	if !strings.Contains(out.String(), "deleted 500 rows") {
		t.Errorf("audit retain said %q, want 500 rows deleted", out.String())
	}
}
