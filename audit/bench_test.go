package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// BenchmarkInsert measures the store's cost per audit row, written in
// batches of 256 as the Writer does under load:
//
//	go test -run '^$' -bench Insert -benchmem ./audit
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
		})
	}
}
