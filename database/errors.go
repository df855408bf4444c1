package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/switchboardhq/switchboard"
)

// Driver errors never leave the store: every pool this package opens goes
// through a driver.Connector of ours (openDB) that classifies what the
// driver returns, in one place for every store. An unreachable or
// overloaded backend becomes switchboard.ErrUnavailable with code
// store_unavailable (503, retryable, retryAfterMs on every surface), and a
// text argument holding a NUL byte is refused with ErrInvalid, code
// invalid_text, on both backends alike (PostgreSQL cannot store one;
// SQLite would). Other errors (constraint violations, no rows) pass
// unchanged, so stores keep matching them with errors.Is/As.
//
// database/sql has no hook for this, and the libraries that wrap drivers
// generically are not among the project's dependencies; the wrapper below
// forwards every optional interface the two drivers implement.

// ConnectTimeout bounds the opening of one connection, so that an
// unreachable database (packets dropped rather than refused) is reported
// as store_unavailable instead of hanging the request.
const ConnectTimeout = 5 * time.Second

// ErrStoreUnavailable is the error of a store call made while the database
// cannot be reached (or, for SQLite, stays locked beyond its busy timeout).
var ErrStoreUnavailable = switchboard.E(switchboard.ErrUnavailable, "store_unavailable",
	"the database is temporarily unavailable; retry later")

// ErrNULText is the error of a text argument that holds a NUL byte.
var ErrNULText = switchboard.E(switchboard.ErrInvalid, "invalid_text", "a text value contains a NUL byte")

// Classify returns err as the store's typed error when it says the backend
// is unavailable (ErrStoreUnavailable, with err as its internal cause), and
// err unchanged otherwise. Stores and the listeners that use pgx directly
// call it; queries through a DB are classified already.
func Classify(err error) error {
	if err == nil || !unavailable(err) {
		return err
	}
	if _, ok := switchboard.AsError(err); ok {
		return err
	}
	if terminated(err) {
		// database/sql retries a statement on another connection (a new
		// one after two failures) when the error is driver.ErrBadConn.
		err = errors.Join(driver.ErrBadConn, err)
	}
	return ErrStoreUnavailable.WithCause(err)
}

// terminated reports whether err is the server ending the session before
// the statement took effect: a FATAL administrator shutdown or command
// (pg_terminate_backend, a fast shutdown or failover), crash shutdown, or
// idle-session timeout. A FATAL error aborts the session's transaction,
// so the statement did nothing, and it is safe to run it on another
// connection. It typically answers the first statement sent on a pooled
// connection the server closed while it was idle: pgx pings a connection
// before reuse only when it has been idle for over a second, so without
// the retry every connection used in the second before a failover would
// fail one request after it (pgx's own ErrBadConn covers only errors
// before anything was sent). Broken sockets without the server's word
// (io.ErrUnexpectedEOF, ECONNRESET) stay unretried: the statement may
// have run.
func terminated(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || (pe.SeverityUnlocalized != "FATAL" && pe.Severity != "FATAL") {
		return false
	}
	return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P05"
}

// unavailable reports whether err says the backend cannot serve now:
// connecting failed, the connection broke, the server is shutting down or
// starting, too many connections, or SQLite's lock outlasted the busy
// timeout.
func unavailable(err error) bool {
	if errors.Is(err, switchboard.ErrUnavailable) {
		return true
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 53300 too many connections;
		// 57P01-57P03: shutting down, crashed, starting up; 57P05: idle
		// session timeout.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "53300" ||
			pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "57P05"
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}

// checkArgs refuses a text argument with a NUL byte. pgx keeps arguments
// as the caller's types (such as switchboard.TenantID), so any string
// kind, or a pointer to one, counts.
func checkArgs(args []driver.NamedValue) error {
	for _, a := range args {
		if hasNUL(a.Value) {
			return ErrNULText
		}
	}
	return nil
}

func checkValues(args []driver.Value) error {
	for _, a := range args {
		if hasNUL(a) {
			return ErrNULText
		}
	}
	return nil
}

func hasNUL(v any) bool {
	if s, ok := v.(string); ok {
		return strings.IndexByte(s, 0) >= 0
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	return rv.Kind() == reflect.String && strings.IndexByte(rv.String(), 0) >= 0
}

// openDB opens a pool of driverName through the classifying connector,
// which counts every statement it runs in n.
func openDB(driverName, dsn string, n *atomic.Int64) (*sql.DB, error) {
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	d := probe.Driver()
	probe.Close()
	var c driver.Connector = dsnConnector{dsn: dsn, d: d}
	if dc, ok := d.(driver.DriverContext); ok {
		if c, err = dc.OpenConnector(dsn); err != nil {
			return nil, err
		}
	}
	return sql.OpenDB(connector{c, n}), nil
}

// dsnConnector is the connector of a driver without one of its own.
type dsnConnector struct {
	dsn string
	d   driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.d }

// connector classifies the errors of connecting and of every connection,
// and counts the statements they run (DB.Statements).
type connector struct {
	c driver.Connector
	n *atomic.Int64
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	dc, err := c.c.Connect(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, ErrStoreUnavailable.WithCause(err)
		}
		return nil, Classify(err)
	}
	return &conn{dc, c.n}, nil
}

func (c connector) Driver() driver.Driver { return c.c.Driver() }

// conn forwards to the driver's connection, classifying errors and
// checking text arguments.
type conn struct {
	c driver.Conn
	n *atomic.Int64
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var (
		s   driver.Stmt
		err error
	)
	if p, ok := c.c.(driver.ConnPrepareContext); ok {
		s, err = p.PrepareContext(ctx, query)
	} else {
		s, err = c.c.Prepare(query)
	}
	if err != nil {
		return nil, Classify(err)
	}
	return &stmt{s, c.n}, nil
}

func (c *conn) Close() error { return c.c.Close() }

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var (
		t   driver.Tx
		err error
	)
	if b, ok := c.c.(driver.ConnBeginTx); ok {
		t, err = b.BeginTx(ctx, opts)
	} else {
		//lint:ignore SA1019 the fallback database/sql itself uses
		t, err = c.c.Begin()
	}
	if err != nil {
		return nil, Classify(err)
	}
	return tx{t}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.c.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := checkArgs(args); err != nil {
		return nil, err
	}
	c.n.Add(1)
	r, err := e.ExecContext(ctx, query, args)
	return r, Classify(err)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.c.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	if err := checkArgs(args); err != nil {
		return nil, err
	}
	c.n.Add(1)
	r, err := q.QueryContext(ctx, query, args)
	if err != nil {
		return nil, Classify(err)
	}
	return wrapRows(r), nil
}

func (c *conn) Ping(ctx context.Context) error {
	if p, ok := c.c.(driver.Pinger); ok {
		return Classify(p.Ping(ctx))
	}
	return nil
}

func (c *conn) CheckNamedValue(v *driver.NamedValue) error {
	if n, ok := c.c.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

func (c *conn) ResetSession(ctx context.Context) error {
	if r, ok := c.c.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *conn) IsValid() bool {
	if v, ok := c.c.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// tx classifies the errors of committing and rolling back.
type tx struct{ t driver.Tx }

func (t tx) Commit() error   { return Classify(t.t.Commit()) }
func (t tx) Rollback() error { return Classify(t.t.Rollback()) }

// stmt classifies the errors of a prepared statement and checks its text
// arguments.
type stmt struct {
	s driver.Stmt
	n *atomic.Int64
}

func (s *stmt) Close() error  { return s.s.Close() }
func (s *stmt) NumInput() int { return s.s.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	if err := checkValues(args); err != nil {
		return nil, err
	}
	s.n.Add(1)
	//lint:ignore SA1019 the fallback database/sql itself uses
	r, err := s.s.Exec(args)
	return r, Classify(err)
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	if err := checkValues(args); err != nil {
		return nil, err
	}
	s.n.Add(1)
	//lint:ignore SA1019 the fallback database/sql itself uses
	r, err := s.s.Query(args)
	if err != nil {
		return nil, Classify(err)
	}
	return wrapRows(r), nil
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := checkArgs(args); err != nil {
		return nil, err
	}
	if e, ok := s.s.(driver.StmtExecContext); ok {
		s.n.Add(1)
		r, err := e.ExecContext(ctx, args)
		return r, Classify(err)
	}
	return nil, driver.ErrSkip
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := checkArgs(args); err != nil {
		return nil, err
	}
	q, ok := s.s.(driver.StmtQueryContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	s.n.Add(1)
	r, err := q.QueryContext(ctx, args)
	if err != nil {
		return nil, Classify(err)
	}
	return wrapRows(r), nil
}

func (s *stmt) CheckNamedValue(v *driver.NamedValue) error {
	if n, ok := s.s.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

// rows classifies the error of reading the next row (a connection that
// breaks mid-result). The drivers' column type details are not forwarded:
// no store asks for them (sql.Rows.ColumnTypes).
type rows struct{ r driver.Rows }

func wrapRows(r driver.Rows) driver.Rows { return rows{r} }

func (r rows) Columns() []string { return r.r.Columns() }
func (r rows) Close() error      { return r.r.Close() }

func (r rows) Next(dest []driver.Value) error {
	err := r.r.Next(dest)
	if err == io.EOF {
		return err // the end of the rows, by database/sql's contract
	}
	return Classify(err)
}
