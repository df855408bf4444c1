package openapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/openapi/specstest"
)

// stripeSpec reads the shared Stripe description or skips.
func stripeSpec(b testing.TB) []byte {
	b.Helper()
	spec, err := os.ReadFile(filepath.Join(specstest.Dir(b), "stripe.yaml"))
	if err != nil {
		b.Skipf("stripe.yaml: %v", err)
	}
	return spec
}

// peakHeap samples the heap in use while fn runs and returns the largest
// sample, in bytes.
func peakHeap(fn func()) uint64 {
	var peak uint64
	var mu sync.Mutex
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapInuse)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	fn()
	close(done)
	<-sampled
	return peak
}

// BenchmarkCompileStripe compiles the 4.2 MB Stripe description (468
// operations) into a registry. Reported: time and allocations per compile,
// the peak heap in use during one (sampled), and the peak RSS of a fresh
// process that does one compile (measured in a child process).
//
//	go test -run '^$' -bench BenchmarkCompileStripe -benchtime 5x ./openapi
func BenchmarkCompileStripe(b *testing.B) {
	spec := stripeSpec(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(spec)))
	var peak uint64
	for b.Loop() {
		runtime.GC()
		p := peakHeap(func() {
			if _, err := Compile(spec, nil); err != nil {
				b.Fatal(err)
			}
		})
		peak = max(peak, p)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	if rss, err := childPeakRSS(); err == nil {
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MB")
	} else {
		b.Logf("peak RSS not measured: %v", err)
	}
}

// childPeakRSS runs this test binary once more, compiling Stripe in
// TestCompileStripeChild, and returns the child's peak resident set.
func childPeakRSS() (int64, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompileStripeChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_COMPILE_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, errors.New("no rusage on this platform")
	}
	return ru.Maxrss * 1024, nil // Linux reports KiB
}

// TestCompileStripeChild is BenchmarkCompileStripe's child process.
func TestCompileStripeChild(t *testing.T) {
	if os.Getenv("SWITCHBOARD_COMPILE_CHILD") != "1" {
		t.Skip("runs only as BenchmarkCompileStripe's child process")
	}
	if _, err := Compile(stripeSpec(t), nil); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkToolsListStripeBuild is the one-time cost of building the
// registry's tools document (API.ToolsJSON): marshalling every tool.
// Serving tools/list is measured by BenchmarkToolsList in package mcp,
// through the endpoint.
func BenchmarkToolsListStripeBuild(b *testing.B) {
	api, err := Compile(stripeSpec(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(struct {
			Tools any `json:"tools"`
		}{api.Tools()}); err != nil {
			b.Fatal(err)
		}
	}
}
