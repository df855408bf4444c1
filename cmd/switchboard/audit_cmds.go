package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/tenants"
)

const auditUsage = `usage: switchboard audit export --tenant SLUG [--from TIME] [--to TIME] [--instance SLUG] [--out FILE]
       switchboard audit retain

On the store directly (no running server needed):

  export   write a tenant's audit rows as NDJSON (one row a line, newest
           first), read a page at a time: for archiving before retention
           deletes them (the API's GET /v1/tenants/{tenant}/audit/export)
  retain   delete the rows past retention now (--audit-retention-days and
           the tenants' own), as every server does hourly
`

// runAudit runs "switchboard audit export" and "audit retain".
func runAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "export" && args[0] != "retain") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, auditUsage)
			return nil
		}
		fmt.Fprint(stderr, auditUsage)
		return errors.New("audit: give export or retain")
	}
	sub := args[0]
	var tenant, from, to, instance, out *string
	cfg, pos, err := parseCommand("audit "+sub, args[1:], getenv, stderr, "\n"+auditUsage, func(fs *flag.FlagSet) {
		if sub == "export" {
			tenant = fs.String("tenant", "", "slug of the tenant whose rows to export (required)")
			from = fs.String("from", "", "only rows at or after this time (RFC 3339)")
			to = fs.String("to", "", "only rows before this time (RFC 3339)")
			instance = fs.String("instance", "", "only rows of this instance slug")
			out = fs.String("out", "", "file to write (created, never overwritten); default standard output")
		}
	})
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("audit %s: takes no arguments", sub)
	}
	q := audit.Query{}
	if sub == "export" {
		if *tenant == "" {
			return errors.New("audit export: --tenant is required")
		}
		q.Instance = *instance
		for _, f := range []struct {
			name, v string
			at      *time.Time
		}{{"from", *from, &q.From}, {"to", *to, &q.To}} {
			if f.v == "" {
				continue
			}
			if *f.at, err = time.Parse(time.RFC3339Nano, f.v); err != nil {
				return fmt.Errorf("audit export: --%s must be an RFC 3339 time", f.name)
			}
		}
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	store := audit.NewStore(db)
	store.RetentionDays = cfg.AuditRetentionDays
	if sub == "retain" {
		st, err := store.Retain(ctx, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dropped %d monthly partitions, deleted %d rows in %d batches\n",
			st.PartitionsDropped, st.RowsDeleted, st.Batches)
		return nil
	}
	t, err := tenants.NewStore(db, nil).Tenant(ctx, *tenant)
	if err != nil {
		return err
	}
	w := stdout
	var f *os.File
	if *out != "" {
		if f, err = os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return fmt.Errorf("audit export: %w", err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	n, err := store.Export(ctx, t.ID, q, bw, nil)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && f != nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("audit export: after %d rows: %w", n, err)
	}
	fmt.Fprintf(stderr, "exported %d audit rows of %s\n", n, t.Slug)
	return nil
}
