package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/migrations"
)

// openStore opens the configured store for a command that uses it (serve,
// admin, keys). The embedded store is migrated in place; a Postgres
// database with migrations pending is refused with the command that fixes
// it, rather than failing later with a raw SQL error.
func openStore(ctx context.Context, cfg *config, logger *slog.Logger) (*database.DB, error) {
	db, err := database.Open(ctx, cfg.DatabaseURL.Reveal(), cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if db.Dialect == database.SQLite {
		ran, err := db.Migrate(ctx)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("migrating the embedded store: %w", err)
		}
		logger.Info("embedded store ready", "path", db.Path, "migrations_applied", len(ran))
		return db, nil
	}
	n, err := migrations.Pending(ctx, db.DB, db.Dialect.String())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("reading the database's migrations: %w", err)
	}
	if n > 0 {
		db.Close()
		return nil, fmt.Errorf("the Postgres database is not migrated (%d migrations pending): run \"switchboard migrate\" with the same SWITCHBOARD_DATABASE_URL first", n)
	}
	return db, nil
}
