package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// BenchmarkInsert measures the store's cost per audit row, written in
// batches of 256 as the Writer does under load:
//
//	go test -run '^$' -bench Insert -benchmem ./audit
//
// On PostgreSQL most of the cost is the server's, not this process's: it
// also reports backend-µs/row, the CPU the database's backends used per
// row (read from /proc: a local server only; absent otherwise).
func BenchmarkInsert(b *testing.B) {
	for _, store := range []string{"sqlite", "postgres"} {
		b.Run(store, func(b *testing.B) {
			db := dbtest.SQLite(b)
			if store == "postgres" {
				db = dbtest.Postgres(b)
			}
			s := audit.NewStore(db)
			batch := make([]audit.Entry, 256)
			b.ReportAllocs()
			cpu0, ok := backendsCPU(db)
			b.ResetTimer()
			for i := 0; i < b.N; i += len(batch) {
				for j := range batch {
					batch[j] = audit.Entry{Time: time.Now().UTC(), Tenant: "ten_bench", Instance: "gh", Caller: "cal_1",
						Agent: "bench-agent", Actor: "usr_1", Subject: "usr_1", Tool: "repositories", Action: "get",
						Outcome: "ok", Status: 200, LatencyUs: int64(i + j)}
				}
				if err := s.Insert(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if cpu1, ok1 := backendsCPU(db); ok && ok1 {
				var d time.Duration
				for pid, t := range cpu1 {
					d += t - cpu0[pid]
				}
				b.ReportMetric(float64(d.Microseconds())/float64(b.N), "backend-µs/row")
			}
		})
	}
}

// backendsCPU is the user+system CPU time used so far by each PostgreSQL
// backend connected to db's database, by pid; false on SQLite or when
// /proc does not have them (a server on another machine).
func backendsCPU(db *database.DB) (map[int]time.Duration, bool) {
	if db.Dialect != database.Postgres {
		return nil, false
	}
	rows, err := db.Query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	cpu := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) != nil {
			return nil, false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			return nil, false
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			return nil, false
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		cpu[pid] = time.Duration(ut+st) * 10 * time.Millisecond // 100 clock ticks a second
	}
	return cpu, rows.Err() == nil
}
