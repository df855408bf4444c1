package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notify publishes payload on channel to every replica listening (Postgres
// NOTIFY, delivered when the surrounding transaction, if any, commits). On
// the embedded store, which serves one process, it does nothing.
func (db *DB) Notify(ctx context.Context, channel, payload string) error {
	if !db.Dialect.Replicated() {
		return nil
	}
	if _, err := db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notifying %s: %w", channel, err)
	}
	return nil
}

// NotifyTx is Notify inside tx: Postgres delivers it when tx commits and
// never if it rolls back, so a change and its notification go together.
func (db *DB) NotifyTx(ctx context.Context, tx *sql.Tx, channel, payload string) error {
	if !db.Dialect.Replicated() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notifying %s: %w", channel, err)
	}
	return nil
}

// Listen delivers every payload published on channel to fn until ctx is
// done. It holds one dedicated connection (LISTEN needs a session) and
// reconnects with backoff when it drops; after every (re)connection it
// calls resync, because notifications sent while it was away are lost, so
// whatever they would have invalidated must be dropped wholesale. When
// resync fails, the connection is closed and the listener reconnects (with
// backoff) and calls resync again. On the embedded store it returns at
// once: there are no other replicas.
func (db *DB) Listen(ctx context.Context, channel string, fn func(payload string), resync func() error, onError func(error)) {
	if !db.Dialect.Replicated() {
		return
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, channel, fn, resync)
		if ctx.Err() != nil {
			return
		}
		if onError != nil && err != nil {
			onError(redactURL(err, db.url))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (db *DB) listenOnce(ctx context.Context, channel string, fn func(string), resync func() error) error {
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return fmt.Errorf("connecting to listen: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listening on %s: %w", channel, err)
	}
	if resync != nil {
		if err := resync(); err != nil {
			return err
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return fmt.Errorf("waiting for notifications: %w", err)
		}
		fn(n.Payload)
	}
}
