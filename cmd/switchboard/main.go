// Command switchboard runs the Switchboard server and its tools.
//
//	switchboard serve     run the server (embedded store unless --database-url)
//	switchboard migrate   apply database migrations
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
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "switchboard:", err)
		}
		os.Exit(1)
	}
}

const usage = `usage: switchboard <command> [flags]

commands:
  serve     run the server (embedded SQLite store unless --database-url is set)
  migrate   apply database migrations and exit

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
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
