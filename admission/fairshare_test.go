package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/admission"
)

// TestFairShareOfACentralClient shares a central OAuth client's budget
// (100 calls a second) among four tenants on a fake clock: one sends 400
// calls a second, 20 times the others' 20, spread over each second. Over
// a minute, each quiet tenant keeps at least 90 % of its calls, the noisy
// one gets at least 90 % of its max-min share (the 40 the others leave),
// and the client never goes over its budget in any second.
func TestFairShareOfACentralClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	c := admission.New(admission.Options{Now: clk.Now, Clients: map[string]float64{"testidp": 100}})
	tenants := []string{"noisy", "q1", "q2", "q3"}
	sent, admitted := map[string]int{}, map[string]int{}
	const seconds, steps = 60, 400
	for sec := range seconds {
		inSecond := 0
		for k := range steps {
			clk.Add(time.Second / steps)
			for _, ten := range tenants {
				if ten != "noisy" && k%20 != 0 {
					continue
				}
				sent[ten]++
				_, err := c.Admit(ctx, admission.Call{Tenant: ten, Instance: "crm", User: "u", Connector: "crm", PerUser: true, Client: "testidp"})
				switch {
				case err == nil:
					admitted[ten]++
					inSecond++
				case switchboard.CodeOf(err) != "rate_limited":
					t.Fatalf("%s: %v", ten, err)
				}
			}
		}
		if inSecond > 100 {
			t.Errorf("second %d: %d calls admitted, over the budget of 100", sec, inSecond)
		}
	}
	for _, q := range tenants[1:] {
		if kept := float64(admitted[q]) / float64(sent[q]); kept < 0.9 {
			t.Errorf("%s kept %.0f %% of its calls (%d of %d), want ≥ 90 %%", q, kept*100, admitted[q], sent[q])
		}
	}
	if share := 40 * seconds; float64(admitted["noisy"]) < 0.9*float64(share) {
		t.Errorf("the noisy tenant got %d calls, want ≥ 90 %% of its share %d", admitted["noisy"], share)
	}
	t.Logf("sent %v, admitted %v", sent, admitted)
	// A client without a budget is not limited.
	if _, err := c.Admit(ctx, admission.Call{Tenant: "noisy", Client: "other"}); err != nil {
		t.Errorf("a client without a budget: %v", err)
	}
}
