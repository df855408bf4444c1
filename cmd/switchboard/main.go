// Command switchboard runs the Switchboard server and its tools.
//
//	switchboard serve       run the server (embedded store unless SWITCHBOARD_DATABASE_URL)
//	switchboard migrate     apply database migrations
//	switchboard connector   generate, lint, index, hash, sign and verify connector packages
//	switchboard admin token create, list and revoke operator tokens on the store
//	switchboard admin invite, login-link: one-time sign-in links for a tenant's people
//	switchboard audit       export a tenant's audit rows (NDJSON); apply retention now
//	switchboard keys        re-seal stored secrets under the current master key
//
// Every flag has an environment equivalent; run a command with -h for them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr), os.Stderr))
}

// exitCode is the process status for run's error: 0 for none and for -h
// (asking for help is not a failure), else 1 after printing the error.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "switchboard:", err)
	return 1
}

const usage = `usage: switchboard <command> [flags]

commands:
  serve       run the server (embedded SQLite store unless SWITCHBOARD_DATABASE_URL is set)
  migrate     apply database migrations and exit
  connector   generate, lint, index, hash, sign and verify connector packages
  admin token create, list or revoke operator tokens directly on the store (recovery)
  admin invite, admin login-link
              mint a one-time invitation or sign-in link for a tenant's people
  audit       export a tenant's audit rows as NDJSON, or apply retention now
  keys        rotate: re-seal every stored secret under the current master key;
              check: report rows still sealed under a previous key

Run "switchboard <command> -h" for the command's flags.
`

// run is main without the process: testable, and every exit path returns.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve", "migrate":
		cfg, err := parseConfig(cmd, rest, getenv, stderr)
		if err != nil {
			return err
		}
		logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.slogLevel()}))
		if cmd == "migrate" {
			return migrate(ctx, cfg, logger)
		}
		return serve(ctx, cfg, logger, stderr)
	case "connector":
		return runConnector(ctx, rest, stdout, stderr)
	case "admin":
		return runAdmin(ctx, rest, getenv, stdout, stderr)
	case "audit":
		return runAudit(ctx, rest, getenv, stdout, stderr)
	case "keys":
		return runKeys(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
