package dbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database"
)

// PostgresServer is a private PostgreSQL cluster owned by one test: its own
// data directory in a temporary folder, listening on 127.0.0.1 at a free
// port, with its Unix socket inside the folder. A test stops and starts it
// to simulate a database outage; the port and the data survive a restart.
// It is made by StartPostgres and removed when the test ends.
type PostgresServer struct {
	t       testing.TB
	bin     string // directory holding initdb, pg_ctl and postgres
	dir     string // temporary folder: data/, sock/, postgres.log
	port    int
	cred    *syscall.Credential // nil when the test does not run as root
	mu      sync.Mutex
	running bool
}

// StartPostgres initialises a new cluster in a temporary folder, starts it
// and returns it running. The cluster is stopped and its folder removed at
// the test's cleanup. PostgreSQL's server binaries are looked up under
// /usr/lib/postgresql/<version>/bin (highest version first), then on PATH;
// when none is found the test is skipped, or fails with CI=true.
//
// PostgreSQL refuses to run as root: when the test runs as root, the cluster
// runs as the "postgres" OS user, which then owns the folder.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	bin, err := postgresBinDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL server binaries are required when CI=true: %v", err)
		}
		t.Skipf("PostgreSQL server binaries not found: %v", err)
	}
	// t.TempDir is private to the test's user (0700), which the postgres
	// user cannot enter, so the cluster gets its own folder.
	dir, err := os.MkdirTemp("", "sbpg")
	if err != nil {
		t.Fatalf("creating cluster folder: %v", err)
	}
	s := &PostgresServer{t: t, bin: bin, dir: dir}
	t.Cleanup(s.remove)
	if os.Geteuid() == 0 {
		s.cred, err = postgresCredential()
		if err != nil {
			t.Fatalf("running PostgreSQL as root is refused by PostgreSQL and %v", err)
		}
	}
	for _, d := range []string{dir, filepath.Join(dir, "sock")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatalf("creating %s: %v", d, err)
		}
		if s.cred != nil {
			if err := os.Chown(d, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				t.Fatalf("handing %s to the postgres user: %v", d, err)
			}
		}
	}
	if out, err := s.run("initdb", "-D", s.dataDir(), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.Start()
	return s
}

// URL is the connection string of the cluster's "postgres" database as
// user postgres (trust authentication). It stays valid across Stop and Start.
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Open opens a pool on the cluster and applies the migrations; the pool
// is closed at the test's cleanup.
func (s *PostgresServer) Open() *database.DB {
	s.t.Helper()
	db, err := database.Open(context.Background(), s.URL(), "")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	return db
}

// Port is the loopback TCP port the cluster listens on.
func (s *PostgresServer) Port() int { return s.port }

// Stop shuts the cluster down (fast mode: open connections are cut, as in an
// outage) and waits until it is gone. Stopping a stopped cluster does nothing.
func (s *PostgresServer) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return
	}
	if out, err := s.run("pg_ctl", "stop", "-D", s.dataDir(), "-m", "fast", "-w", "-t", "60"); err != nil {
		s.t.Fatalf("pg_ctl stop: %v\n%s\n%s", err, out, s.logTail())
	}
	s.running = false
}

// Start starts the cluster again on the same port with the same data, and
// waits until it accepts connections. Starting a running cluster does
// nothing.
func (s *PostgresServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	opts := strings.Join([]string{
		"-c listen_addresses=127.0.0.1",
		"-p " + strconv.Itoa(s.port),
		"-k " + filepath.Join(s.dir, "sock"),
		"-c fsync=off", // tests never survive a power cut; a clean stop still checkpoints
		"-c shared_buffers=16MB",
		"-c max_connections=100",
	}, " ")
	var out []byte
	var err error
	// The port was free when chosen; right after a stop the old listener can
	// linger for a moment, so a failed start is retried briefly.
	for attempt := 0; attempt < 5; attempt++ {
		out, err = s.run("pg_ctl", "start", "-D", s.dataDir(), "-l", s.logFile(), "-w", "-t", "60", "-o", opts)
		if err == nil {
			s.running = true
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, s.logTail())
}

// remove stops the cluster at once and deletes its folder.
func (s *PostgresServer) remove() {
	s.mu.Lock()
	if s.running {
		_, _ = s.run("pg_ctl", "stop", "-D", s.dataDir(), "-m", "immediate", "-w", "-t", "30")
		s.running = false
	}
	s.mu.Unlock()
	_ = os.RemoveAll(s.dir)
}

func (s *PostgresServer) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *PostgresServer) logFile() string { return filepath.Join(s.dir, "postgres.log") }

// run runs one of the cluster's binaries as the cluster's OS user.
func (s *PostgresServer) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Env = append(cmd.Env, "HOME="+s.dir, "USER=postgres", "LOGNAME=postgres")
	}
	return cmd.CombinedOutput()
}

// logTail returns the end of the server log, for failure messages.
func (s *PostgresServer) logTail() string {
	b, err := os.ReadFile(s.logFile())
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "postgres.log (end):\n" + string(b)
}

// postgresBinDir finds the directory holding initdb and pg_ctl.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if usable(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil && usable(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no initdb and pg_ctl under /usr/lib/postgresql/<version>/bin or on PATH")
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func usable(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// postgresCredential is the identity of the "postgres" OS user.
func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("no postgres OS user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// freePort returns a loopback TCP port nobody listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
