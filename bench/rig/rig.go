// Package rig is what the bench programs (bench/overhead, bench/startup,
// bench/scale) stand on: the server binary, a free loopback address,
// waiting for a server's /readyz, an empty PostgreSQL database, the
// tenants service of the built-in catalog on a store, and what a process
// costs, read from /proc (Linux): its CPU time and resident memory, and
// the machine's load.
package rig

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/switchboardhq/switchboard/catalog"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// ServerBinary returns bin, or, when it is empty, a switchboard binary
// built from this tree into dir.
func ServerBinary(bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "switchboard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/switchboard")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building: %w", err)
	}
	return bin, nil
}

// BuiltinService returns the tenants service of the built-in catalog on
// db, sealing with ring, for the programs that install or load instances
// themselves.
func BuiltinService(db *database.DB, ring *secrets.Keyring) (*tenants.Service, *registry.Catalog, error) {
	store := tenants.NewStore(db, secrets.NewStore(db, ring))
	cat, err := registry.LoadCatalogWith(catalog.FS(), openapi.Compile, registry.LoadOptions{Compiled: &registry.Compiled{}})
	if err != nil {
		return nil, nil, err
	}
	return tenants.NewService(store, cat), cat, nil
}

// LoopbackAddr returns a free 127.0.0.1 address.
func LoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// WaitReady polls base's /readyz until it answers 200, for at most limit.
func WaitReady(base string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("server at %s not ready after %s", base, limit)
}

// FreshPostgres creates an empty database named name on the test server
// ($SWITCHBOARD_TEST_DATABASE_URL, else the local trust-auth server) and
// returns its URL and the function that drops it.
func FreshPostgres(name string) (string, func(), error) {
	adminURL := os.Getenv("SWITCHBOARD_TEST_DATABASE_URL")
	if adminURL == "" {
		adminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	db, err := sql.Open("pgx", adminURL)
	if err != nil {
		return "", nil, err
	}
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("creating the bench database: %w", err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		db.Close()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		db.Close()
	}, nil
}

// DatabaseCPU is the user+system CPU time used so far by the PostgreSQL
// backends connected to database name (a local server: their processes
// are read from /proc), by pid; nil when it cannot be read. Backends
// that exit take their time with them, so deltas between two readings
// are of the backends alive at the second (a store's pool keeps its
// connections during a run). The server's shared processes (WAL writer,
// checkpointer, autovacuum) are not counted.
func DatabaseCPU(name string) map[int]time.Duration {
	adminURL := os.Getenv("SWITCHBOARD_TEST_DATABASE_URL")
	if adminURL == "" {
		adminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	db, err := sql.Open("pgx", adminURL)
	if err != nil {
		return nil
	}
	defer db.Close()
	rows, err := db.Query(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, name)
	if err != nil {
		return nil
	}
	defer rows.Close()
	cpu := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			cpu[pid] = CPUTime(pid)
		}
	}
	return cpu
}

// DatabaseCPUSince is the CPU the backends of now used since then (both
// from DatabaseCPU); a backend absent from then started in between.
func DatabaseCPUSince(then, now map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range now {
		d += t - then[pid]
	}
	return d
}

// CPUTime is the user+system CPU time process pid has used so far; 0 when
// unknown. On a loaded machine it is the figure that does not depend on
// what else runs.
func CPUTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) in ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	// Clock ticks: 100 per second on every Linux Go supports.
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// Memory returns process pid's resident set and its peak, in KiB.
func Memory(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Admin sends one admin API request with the operator token and returns
// its JSON answer; a status of 300 or more is an error naming it.
func Admin(base, token, method, path string, body any) (map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %d %v", method, path, resp.StatusCode, out)
	}
	return out, nil
}
