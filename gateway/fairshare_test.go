package gateway_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// stepClock is admission's clock in a test: moved by hand.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestFairShareThroughACentralClient is the fair share of a central OAuth
// client end to end: four tenants each install the crm connector in mode
// oauthCentral (the platform's one client at the authorization server,
// whose budget is 100 calls a second), each has a user connected through
// the real OAuth flow, and they call through App mode against the loopback
// vendor. One tenant sends 20 times the others' load (200 calls a second
// against their 10, spread over each second, on admission's clock). Over
// six seconds each quiet tenant keeps at least 90 % of its calls, no
// second goes over the budget, and a refused call never reaches the
// vendor: it answers 429 rate_limited with a retry delay. The noisy one
// gets at least 90 % of what the others leave (70 a second) from the
// second second on: in the first, the others' demand is not known yet,
// and each tenant is held to an equal share (25).
func TestFairShareThroughACentralClient(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	clk := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, _ := newAdmissionStack(t, db, admission.Options{Now: clk.Now, Clients: map[string]float64{"testidp": 100}})
	as := authztest.New(t, authztest.Options{})
	up := newUpstream(t, as)
	as.AddClient(authztest.Client{ID: "platform-client", Secret: "central-secret-canary", Scopes: []string{"contacts.read"},
		RedirectURIs: []string{s.srv.URL + "/oauth/callback"}})
	if _, _, err := s.prov.Put(context.Background(), "testidp", providerReq(as, newSecret("platform-client"), newSecret("central-secret-canary"))); err != nil {
		t.Fatal(err)
	}
	tenants := []string{"noisy", "quiet1", "quiet2", "quiet3"}
	tokens := map[string]string{}
	for _, ten := range tenants {
		s.tenant(t, ten)
		s.install(t, ten, "crm", "oauthCentral", map[string]string{"API_URL": up.URL}, agent)
		tokens[ten] = s.caller(t, ten, headerPlatform("alice"))
		if st, page := s.connect(t, s.newBrowser(as, "alice", tokens[ten]), ten, "crm"); st != 200 {
			t.Fatalf("%s: central connect = %d %s", ten, st, page)
		}
	}
	sent, admitted := map[string]int{}, map[string]int{}
	hitsBefore := up.hits.Load()
	const seconds, steps = 6, 200
	noisyAfterFirst := 0
	for sec := range seconds {
		inSecond := 0
		for k := range steps {
			clk.Add(time.Second / steps)
			for _, ten := range tenants {
				if ten != "noisy" && k%20 != 0 {
					continue
				}
				sent[ten]++
				r := appCall(t, s.srv.URL, ten, "crm", tokens[ten], "alice")
				switch {
				case r.status == 200:
					admitted[ten]++
					inSecond++
					if ten == "noisy" && sec > 0 {
						noisyAfterFirst++
					}
				case r.status != 429 || r.code != "rate_limited" || r.retryAfterMs <= 0 || r.retryAfter == "":
					t.Fatalf("%s: %+v, want 200 or 429 rate_limited with a delay", ten, r)
				}
			}
		}
		if inSecond > 100 {
			t.Errorf("second %d: %d calls admitted, over the central client's budget of 100", sec, inSecond)
		}
	}
	t.Logf("sent %v, admitted %v (the noisy tenant %d after the first second)", sent, admitted, noisyAfterFirst)
	for _, q := range tenants[1:] {
		if kept := float64(admitted[q]) / float64(sent[q]); kept < 0.9 {
			t.Errorf("%s kept %.0f %% of its calls (%d of %d), want ≥ 90 %%", q, kept*100, admitted[q], sent[q])
		}
	}
	if share := 70 * (seconds - 1); float64(noisyAfterFirst) < 0.9*float64(share) {
		t.Errorf("after the first second the noisy tenant got %d calls, want ≥ 90 %% of its share %d", noisyAfterFirst, share)
	}
	if admitted["noisy"]-noisyAfterFirst < 25 {
		t.Errorf("in the first second the noisy tenant got %d calls, want its equal share, 25", admitted["noisy"]-noisyAfterFirst)
	}
	total := 0
	for _, n := range admitted {
		total += n
	}
	if hits := up.hits.Load() - hitsBefore; hits != int64(total) {
		t.Errorf("the vendor saw %d calls, want the %d admitted", hits, total)
	}
}
