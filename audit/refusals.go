package audit

import (
	"sync"
	"sync/atomic"
	"time"
)

// RefusalLimit bounds the audit rows of refused calls, so that a flood of
// refusals (a misconfigured agent, a scan with a bad token) cannot fill
// the audit table: per key (tenant and caller) at most PerWindow rows are
// written per Window; the refusals beyond are counted, and the count is
// reported with the key's first refusal of a later window (and in
// Suppressed). A fixed window per key is all this needs: the bound is on
// rows written, not a rate an agent relies on.
type RefusalLimit struct {
	// PerWindow defaults to 10, Window to one minute.
	PerWindow int
	Window    time.Duration

	mu         sync.Mutex
	keys       map[string]*refusalWindow
	suppressed atomic.Int64
}

type refusalWindow struct {
	start      time.Time
	n          int
	suppressed int
}

// maxRefusalKeys bounds the limiter's memory; past it, keys whose window
// has ended are forgotten.
const maxRefusalKeys = 10000

// Allow reports whether a refusal under key gets its row at now, and how
// many refusals under key went unrecorded in earlier windows since the
// last row (to be logged with it).
func (l *RefusalLimit) Allow(key string, now time.Time) (ok bool, unrecorded int) {
	per, window := l.PerWindow, l.Window
	if per <= 0 {
		per = 10
	}
	if window <= 0 {
		window = time.Minute
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*refusalWindow{}
	}
	w := l.keys[key]
	if w == nil {
		if len(l.keys) >= maxRefusalKeys {
			for k, old := range l.keys {
				if now.Sub(old.start) >= window {
					delete(l.keys, k)
				}
			}
		}
		w = &refusalWindow{start: now}
		l.keys[key] = w
	}
	if now.Sub(w.start) >= window {
		w.start, w.n = now, 0
	}
	if w.n >= per {
		w.suppressed++
		l.suppressed.Add(1)
		return false, 0
	}
	w.n++
	unrecorded, w.suppressed = w.suppressed, 0
	return true, unrecorded
}

// Suppressed is how many refusals got no row.
func (l *RefusalLimit) Suppressed() int64 { return l.suppressed.Load() }
