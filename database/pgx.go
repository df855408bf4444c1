package database

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// errNotPgx is the error of PgxConn on a pool whose connections are not
// pgx's (SQLite).
var errNotPgx = errors.New("database: not a PostgreSQL connection")

// PgxConn runs fn with one of the pool's PostgreSQL connections as pgx's
// own, for what database/sql cannot say: the COPY protocol (the audit
// log's batches, audit.Store.Insert). fn must leave the connection as it
// found it (no transaction open); a connection pgx closed on an error is
// dropped from the pool. Its statements are not counted in Statements,
// and its text arguments are not checked for NUL (the caller's values
// must be clean). Errors are classified as the pool's are.
func (db *DB) PgxConn(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return Classify(c.Raw(func(dc any) error {
		if w, ok := dc.(*conn); ok {
			dc = w.c
		}
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errNotPgx
		}
		return fn(sc.Conn())
	}))
}
