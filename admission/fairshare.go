package admission

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard"
)

// fairShare splits the budget of a central OAuth client, which its
// provider limits as a whole, across the tenants that use it: per window,
// each tenant active now or in the previous window is guaranteed an equal
// share of the window's budget, and takes more only from what the others
// are not expected to use (their demand of the previous window, up to
// their share). A tenant sending far more than the others gets what they
// leave (max-min fairness), never what they need.
type fairShare struct {
	perWindow int
	window    time.Duration

	mu    sync.Mutex
	cur   int64 // window number
	total int
	// used and tried are this window's admitted and attempted calls by
	// tenant; before are the previous window's attempts.
	used, tried, before map[string]int
}

// minPerWindow is the least budget a window holds: a slow budget (per
// hour) gets a longer window rather than a share rounded to nothing.
const minPerWindow = 100

func newFairShare(perSecond float64, window time.Duration) *fairShare {
	if need := time.Duration(minPerWindow / perSecond * float64(time.Second)); need > window {
		window = min(need, time.Hour)
	}
	return &fairShare{perWindow: max(1, int(math.Floor(perSecond*window.Seconds()))), window: window,
		used: map[string]int{}, tried: map[string]int{}, before: map[string]int{}}
}

// admit takes one call of tenant from the budget, or says how long until
// the next window.
func (f *fairShare) admit(tenant string, now time.Time) (bool, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := now.UnixNano() / int64(f.window)
	if w != f.cur {
		if w == f.cur+1 {
			f.before = f.tried
		} else {
			f.before = map[string]int{}
		}
		f.cur, f.total = w, 0
		f.used, f.tried = map[string]int{}, map[string]int{}
	}
	f.tried[tenant]++
	wait := time.Duration((w+1)*int64(f.window) - now.UnixNano())
	if f.total >= f.perWindow {
		return false, wait
	}
	// The active tenants: this window's and the previous one's.
	n := len(f.tried)
	for t := range f.before {
		if _, ok := f.tried[t]; !ok {
			n++
		}
	}
	share := float64(f.perWindow) / float64(n)
	if float64(f.used[tenant]) < share {
		f.used[tenant]++
		f.total++
		return true, 0
	}
	// Over its share: only what the others are not expected to use.
	reserved := 0.0
	expect := func(t string) float64 {
		if d, ok := f.before[t]; ok {
			return min(share, float64(d))
		}
		return share // new this window: its demand is unknown
	}
	for t := range f.tried {
		if t != tenant {
			reserved += max(0, expect(t)-float64(f.used[t]))
		}
	}
	for t := range f.before {
		if _, ok := f.tried[t]; !ok && t != tenant {
			reserved += expect(t)
		}
	}
	if float64(f.total)+reserved+1 <= float64(f.perWindow) {
		f.used[tenant]++
		f.total++
		return true, 0
	}
	return false, wait
}

// admitClient takes the call from its central client's fair share.
func (c *Controller) admitClient(fs *fairShare, call Call, now time.Time) error {
	ok, wait := fs.admit(call.Tenant, now)
	if ok {
		return nil
	}
	c.metrics.AdmissionRefused(scopeClient, "rate")
	wait = retryIn(wait)
	return &switchboard.Error{Kind: switchboard.ErrUnavailable, Code: "rate_limited", RetryAfter: wait,
		Message: fmt.Sprintf("this workspace has used its share of the shared OAuth client's call budget; retry after %s", wait)}
}
