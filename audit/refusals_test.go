package audit_test

import (
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/audit"
)

// Each key gets PerWindow rows a window; the refusals beyond are counted
// and reported with the key's next row, in a later window.
func TestRefusalLimitBoundsPerKey(t *testing.T) {
	t.Parallel()
	l := &audit.RefusalLimit{PerWindow: 3, Window: time.Minute}
	now := time.Unix(1000, 0)
	allowed := 0
	for range 10 {
		if ok, _ := l.Allow("ten_a/cal_1", now); ok {
			allowed++
		}
	}
	if ok, _ := l.Allow("ten_a/cal_2", now); !ok || allowed != 3 {
		t.Fatalf("allowed %d of 10 for one key (want 3); another key refused: %v", allowed, ok)
	}
	if l.Suppressed() != 7 {
		t.Fatalf("Suppressed = %d, want 7", l.Suppressed())
	}
	ok, unrecorded := l.Allow("ten_a/cal_1", now.Add(time.Minute))
	if !ok || unrecorded != 7 {
		t.Fatalf("next window: ok=%v unrecorded=%d, want true and 7", ok, unrecorded)
	}
}
