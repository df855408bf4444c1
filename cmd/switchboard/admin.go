package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/switchboardhq/switchboard/auth"
)

const adminUsage = `usage: switchboard admin token <subcommand> [flags]
       switchboard admin invite|login-link [flags]   (see switchboard admin invite -h)

Operator tokens of the admin API, managed on the store directly (no running
server needed: the recovery path when every token is lost).

subcommands:
  create --name NAME   create a token and print it once on stdout
  list                 list tokens (id, name, source, created, last used, revoked)
  revoke ID            revoke a token; servers refuse it within a minute
`

// runAdmin runs "switchboard admin token <create|list|revoke>", "admin
// invite" and "admin login-link".
func runAdmin(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "invite" || args[0] == "login-link") {
		return runAdminLink(ctx, args[0], args[1:], getenv, stdout, stderr)
	}
	if len(args) < 2 || args[0] != "token" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, adminUsage)
			return nil
		}
		fmt.Fprint(stderr, adminUsage)
		return errors.New("admin: give token create, token list or token revoke")
	}
	sub, rest := args[1], args[2:]
	var name *string
	extra := func(fs *flag.FlagSet) {
		if sub == "create" {
			name = fs.String("name", "", "what the token is for (required)")
		}
	}
	switch sub {
	case "create", "list", "revoke":
	default:
		fmt.Fprint(stderr, adminUsage)
		return fmt.Errorf("admin token: unknown subcommand %q", sub)
	}
	cfg, pos, err := parseCommand("admin token "+sub, rest, getenv, stderr, "\n"+adminUsage, extra)
	if err != nil {
		return err
	}
	wantArgs := map[string]int{"create": 0, "list": 0, "revoke": 1}[sub]
	if len(pos) != wantArgs {
		return fmt.Errorf("admin token %s: takes %d arguments, got %d", sub, wantArgs, len(pos))
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	ops := auth.NewOperators(db)
	switch sub {
	case "create":
		token, rec, err := ops.Create(ctx, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "created operator token %s (%q); it is shown once:\n", rec.ID, rec.Name)
		fmt.Fprintln(stdout, token.Reveal())
		return nil
	case "revoke":
		rec, err := ops.Revoke(ctx, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s (%q) at %s\n", rec.ID, rec.Name, rec.RevokedAt.Format(time.RFC3339))
		return nil
	}
	list, err := ops.List(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSOURCE\tCREATED\tLAST USED\tREVOKED")
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Source, when(&t.CreatedAt), when(t.LastUsedAt), when(t.RevokedAt))
	}
	return tw.Flush()
}
