package audit

import (
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkJournalAppend measures Journal.Append from one caller and from
// 16 concurrent ones (fsync every 200 ms, 4 MiB segments, as the server
// runs it). cpu-ns/op is the process's user and system time per row (the
// encoding, the copy into the mapped segment or the write(2), the pages
// faulted in ahead, the wake-ups between callers), rows/write the rows one
// write carried (1 for a copy into a mapping):
//
//	go test -run '^$' -bench JournalAppend -benchtime 100000x ./audit
func BenchmarkJournalAppend(b *testing.B) {
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprint("callers=", callers), func(b *testing.B) {
			j, _, err := OpenJournal(b.TempDir(), 200*time.Millisecond, 0, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			now := time.Now().UTC()
			proto := Entry{ID: NewID(now), Time: now, Tenant: "ten_bench", Instance: "gh", Caller: "cal_1",
				Agent: "bench-agent", Actor: "usr_1", Subject: "usr_1", Tool: "repositories", Action: "get",
				Outcome: "ok", Status: 200, LatencyUs: 1234}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			var wg sync.WaitGroup
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rows := make([]Entry, 0, 256)
					for i := c; i < b.N; i += callers {
						e := proto
						if err := j.Append(&e); err != nil {
							b.Error(err)
							return
						}
						// Released in batches, as the Writer's loop does
						// once the store has the rows.
						if rows = append(rows, e); len(rows) == cap(rows) {
							j.Release(rows)
							rows = rows[:0]
						}
					}
					j.Release(rows)
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			groups, records := j.stats()
			b.ReportMetric(float64(records)/float64(groups), "rows/write")
		})
	}
}

// processCPU is the process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
