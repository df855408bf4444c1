package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchboardhq/switchboard/secrets"
)

const keysUsage = `usage: switchboard keys <rotate|check> [flags]

Master key rotation, online: give every replica the new key as
SWITCHBOARD_MASTER_KEY and the old one in SWITCHBOARD_PREVIOUS_MASTER_KEYS,
restart them, then run "keys rotate" with the same settings. It re-seals
every stored secret under the new key, row by row (a row another replica
changes meanwhile is left to that write), and can be stopped and run again.
When "keys check" reports no row under a previous key, remove it.

subcommands:
  rotate [--batch N]   re-seal every row not under the current key
  check                count rows per key; exits 1 while any row is not
                       under the current key
`

// errKeysBehind reports that keys check found rows under an old key.
var errKeysBehind = errors.New("some secret rows are not sealed under the current master key")

// runKeys runs "switchboard keys <rotate|check>".
func runKeys(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "rotate" && args[0] != "check") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, keysUsage)
			return nil
		}
		fmt.Fprint(stderr, keysUsage)
		return errors.New("keys: give rotate or check")
	}
	sub := args[0]
	var batch *int
	extra := func(fs *flag.FlagSet) {
		if sub == "rotate" {
			batch = fs.Int("batch", 200, "rows read per query")
		}
	}
	cfg, pos, err := parseCommand("keys "+sub, args[1:], getenv, stderr, "\n"+keysUsage, extra)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("keys %s: unexpected arguments", sub)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.slogLevel()}))
	keys, _, err := secrets.LoadKeyring(cfg.keyOptions())
	if err != nil {
		return err
	}
	db, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	store := secrets.NewStore(db, keys)
	if sub == "rotate" {
		rep, err := store.Reseal(ctx, secrets.ResealOptions{BatchSize: *batch, AfterBatch: func(r secrets.ResealReport) {
			fmt.Fprintf(stderr, "re-sealed %d rows so far\n", r.Resealed)
		}})
		fmt.Fprintf(stdout, "re-sealed %d rows under key %s; %d changed meanwhile and were left to their writer; %d do not open\n",
			rep.Resealed, keys.PrimaryID(), rep.Skipped, len(rep.Failed))
		for _, ref := range rep.Failed {
			fmt.Fprintf(stdout, "does not open: tenant %q owner %q name %q\n", ref.Tenant, ref.Owner, ref.Name)
		}
		if err != nil {
			return fmt.Errorf("keys rotate stopped (run it again to resume): %w", err)
		}
		if len(rep.Failed) > 0 {
			return fmt.Errorf("%d rows do not open with the given keys", len(rep.Failed))
		}
	}
	usage, err := store.KeyUsage(ctx)
	if err != nil {
		return err
	}
	behind := 0
	for _, u := range usage {
		state := "previous key"
		switch {
		case u.Primary:
			state = "current key"
		case !u.InKeyring:
			state = "unknown key: these rows do not open"
		}
		if !u.Primary {
			behind += u.Rows
		}
		fmt.Fprintf(stdout, "key %s: %d rows (%s)\n", u.KeyID, u.Rows, state)
	}
	if behind > 0 {
		fmt.Fprintf(stdout, "%d rows are not under the current key %s: run \"switchboard keys rotate\"\n", behind, keys.PrimaryID())
		return errKeysBehind
	}
	fmt.Fprintf(stdout, "every row is sealed under the current key %s\n", keys.PrimaryID())
	return nil
}
