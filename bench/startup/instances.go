package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboardhq/switchboard/bench/rig"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// runInstances measures what app instances cost in memory on PostgreSQL:
// it installs n GitHub instances across m tenants in a fresh database,
// then (1) starts the real server on the database and on an empty one
// and compares their resident memory once ready (idle instances must
// cost nothing: nothing may preload them), and (2) in this process,
// resolves every instance through a gateway built on the store, as a
// first call does, and reports the heap each resolved instance holds and
// the statements a cold resolve runs (pg_stat_database's commits: one per
// autocommitted statement).
func runInstances(n, m int, bin string, settle time.Duration) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "switchboard-instances-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin, err = rig.ServerBinary(bin, dir); err != nil {
		return err
	}
	key := make([]byte, 32)
	rand.Read(key)
	keyB64 := base64.StdEncoding.EncodeToString(key)

	full, dropFull, err := rig.FreshPostgres(fmt.Sprintf("switchboard_startup_%d_full", os.Getpid()))
	if err != nil {
		return err
	}
	defer dropFull()
	empty, dropEmpty, err := rig.FreshPostgres(fmt.Sprintf("switchboard_startup_%d_empty", os.Getpid()))
	if err != nil {
		return err
	}
	defer dropEmpty()

	edb, err := database.Open(ctx, empty, "")
	if err != nil {
		return err
	}
	_, err = edb.Migrate(ctx)
	edb.Close()
	if err != nil {
		return err
	}
	db, err := database.Open(ctx, full, "")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}
	ring, err := secrets.NewKeyring(key)
	if err != nil {
		return err
	}
	svc, cat, err := rig.BuiltinService(db, ring)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := install(ctx, svc, n, m); err != nil {
		return err
	}
	fmt.Printf("installed %d GitHub instances across %d tenants on PostgreSQL in %s\n", n, m, time.Since(t0).Round(time.Second))

	// (1) The server's resident memory with and without the instances.
	rss := map[string]int64{}
	for _, c := range []struct{ name, url string }{{"empty", empty}, {"full", full}} {
		kb, err := serverRSS(bin, c.url, keyB64, filepath.Join(dir, "data-"+c.name), settle)
		if err != nil {
			return fmt.Errorf("server on the %s database: %w", c.name, err)
		}
		rss[c.name] = kb
	}
	perIdle := float64(rss["full"]-rss["empty"]) * 1024 / float64(n)
	fmt.Printf("server resident once ready: empty database %.1f MB, %d instances %.1f MB: %.0f bytes per idle instance\n",
		float64(rss["empty"])/1024, n, float64(rss["full"])/1024, perIdle)

	// (2) Resolving every instance, as first calls do.
	g := gateway.New(gateway.Config{Tenants: svc, Catalog: cat})
	// The statements are counted from another database (so that reading
	// the counter does not move it) as the full database's commits, once
	// the backends have flushed them: a backend reports its statistics
	// at most once a second while busy and within 10 s when idle.
	stats, err := sql.Open("pgx", empty)
	if err != nil {
		return err
	}
	defer stats.Close()
	fullName := strings.TrimPrefix(mustParse(full).Path, "/")
	commits := func() int64 {
		var last int64 = -1
		var stable time.Time
		for ; ; time.Sleep(time.Second) {
			var x int64
			stats.QueryRow(`SELECT pg_stat_clear_snapshot()`).Scan(new(any))
			if err := stats.QueryRow(`SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, fullName).Scan(&x); err != nil {
				return -1
			}
			if x != last {
				last, stable = x, time.Now()
			} else if time.Since(stable) > 11*time.Second {
				return x
			}
		}
	}
	const probe = 200
	before := commits()
	for i := range probe {
		if _, err := g.Resolve(ctx, tenantSlug(i%m), instanceSlug(i)); err != nil {
			return err
		}
	}
	perResolve := float64(commits()-before) / probe
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	for i := probe; i < n; i++ {
		if _, err := g.Resolve(ctx, tenantSlug(i%m), instanceSlug(i)); err != nil {
			return err
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	perResolved := float64(int64(ms.HeapAlloc)-int64(heap0)) / float64(n-probe)
	runtime.KeepAlive(g)
	fmt.Printf("a cold resolve runs %.1f statements; a resolved (cached) instance holds %.0f bytes of heap\n", perResolve, perResolved)
	fmt.Printf("%-40s %9.0f B  goal <= 2048 B  %s\n", "memory per idle app instance", perIdle, mark(perIdle <= 2048))
	fmt.Printf("%-40s %9.1f    goal 1          %s\n", "statements per cold instance", perResolve, mark(perResolve <= 1))
	return nil
}

func mark(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

func tenantSlug(i int) string   { return fmt.Sprintf("tenant-%05d", i) }
func instanceSlug(i int) string { return fmt.Sprintf("gh-%06d", i) }

// install creates m tenants and n instances (instance i in tenant i mod
// m), eight at a time.
func install(ctx context.Context, svc *tenants.Service, n, m int) error {
	for i := range m {
		if _, err := svc.CreateTenant(ctx, tenantSlug(i), ""); err != nil {
			return err
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				tok := secrets.New("bench-upstream-key")
				if _, _, err := svc.Install(ctx, tenantSlug(i%m), instanceSlug(i), tenants.InstallRequest{
					ConnectorID: "github", AuthMode: "apiKey", Agents: []string{"bench-agent"},
					Fields: map[string]*secrets.Secret{"GITHUB_TOKEN": &tok},
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// serverRSS starts the server on the database and returns its resident
// memory, in KiB, once ready and settled.
func serverRSS(bin, dbURL, key, data string, settle time.Duration) (int64, error) {
	addr, err := rig.LoopbackAddr()
	if err != nil {
		return 0, err
	}
	srv := exec.Command(bin, "serve", "--addr", addr, "--data-dir", data, "--log-level", "error")
	srv.Env = append(os.Environ(), "SWITCHBOARD_DATABASE_URL="+dbURL, "SWITCHBOARD_MASTER_KEY="+key, "SWITCHBOARD_ADMIN_TOKEN=bench-operator-token")
	srv.Stdout, srv.Stderr = io.Discard, os.Stderr
	if err := srv.Start(); err != nil {
		return 0, err
	}
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	if err := rig.WaitReady("http://"+addr, 2*time.Minute); err != nil {
		return 0, err
	}
	time.Sleep(settle)
	kb, _ := rig.Memory(srv.Process.Pid)
	return kb, nil
}

func mustParse(u string) *url.URL {
	x, err := url.Parse(u)
	if err != nil {
		panic(err)
	}
	return x
}
