package database

import "github.com/switchboardhq/switchboard/migrations"

// Dialect is the storage backend an open DB speaks. SQL is written once
// for both where it can be ($1 placeholders, ON CONFLICT, RETURNING); the
// methods of Dialect are the seam for what differs.
type Dialect int

// The backends.
const (
	// Postgres is PostgreSQL through pgx: production, many replicas.
	Postgres Dialect = iota + 1
	// SQLite is the embedded modernc.org/sqlite file: one node.
	SQLite
)

// String is the dialect's name, as migrations and log lines use it.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return migrations.Postgres
	case SQLite:
		return migrations.SQLite
	}
	return "unknown"
}

// LockRow is the clause that locks the rows a SELECT reads until the
// transaction ends: FOR UPDATE on Postgres. On the embedded store it is
// empty, because every transaction begins IMMEDIATE and so already holds
// the database's one write lock.
func (d Dialect) LockRow() string {
	if d == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// Replicated reports whether several server processes may share the
// store, so that changes must be announced (LISTEN/NOTIFY) and locks taken
// across processes.
func (d Dialect) Replicated() bool { return d == Postgres }
