// Package chromiumtest starts the headless Chromium of browser tests (the
// console's pages, MCP Apps views): Debian's chromium or $CHROMIUM, on
// loopback only. Without a chromium the test skips, and fails under
// CI=true.
package chromiumtest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path finds Debian's chromium (or $CHROMIUM). Without one the test
// skips, and fails under CI=true.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: .ci/run installs Debian's chromium package")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); CI fails here instead")
	return ""
}

// Start starts one headless Chromium for the test and returns its
// context. It reaches loopback only: every other host name resolves to
// nothing, no proxy, no GPU, no background networking (chromedp's
// default options: headless, no background networking, no first run).
// The whole session is bounded by limit, so that a step waiting for
// something that never comes fails the test rather than hanging it.
func Start(t testing.TB, limit time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Path(t)),
		chromedp.NoSandbox, // containers run tests as root
		chromedp.DisableGPU,
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
	)
	bounded, cancelBound := context.WithTimeout(context.Background(), limit)
	actx, cancelAlloc := chromedp.NewExecAllocator(bounded, opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc(); cancelBound() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}
