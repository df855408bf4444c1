package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestUnknownInstancesAreRemembered checks, on both stores, that a request
// for an unknown tenant or instance costs a lookup once and then none, and
// that creating the tenant and the instance makes them resolve at once.
func TestUnknownInstancesAreRemembered(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		s := newStack(t, db, loadCRM(t), &clock{})
		for _, probe := range []struct{ tenant, instance string }{{"initech", "crm"}, {"acme", "crm"}} {
			if probe.tenant == "acme" {
				s.tenant(t, "acme")
			}
			for i := range 1000 {
				before := db.Statements()
				_, err := s.gw.Resolve(ctx, probe.tenant, probe.instance)
				if switchboard.CodeOf(err) != "not_found" {
					t.Fatalf("%v: err = %v, want not_found", probe, err)
				}
				if n := db.Statements() - before; i > 0 && n != 0 {
					t.Fatalf("%v: request %d cost %d statements, want 0", probe, i, n)
				}
			}
		}
		// The unknown tenant acme was forgotten when it was created (the
		// second probe looked it up); now the instance is.
		up := newUpstream(t, nil)
		s.install(t, "acme", "crm", "apiKey", map[string]string{"API_URL": up.URL, "API_KEY": "good-key"}, agent)
		if _, err := s.gw.Resolve(ctx, "acme", "crm"); err != nil {
			t.Fatalf("an instance created after it was remembered unknown: %v", err)
		}
	})
}

// TestUnknownInstanceCreatedOnAnotherReplica checks that an instance
// remembered unknown on replica B resolves there within the notification
// latency once replica A creates it.
func TestUnknownInstanceCreatedOnAnotherReplica(t *testing.T) {
	t.Parallel()
	replicas := dbtest.Replicas(t, 2)
	a := newStack(t, replicas[0], loadCRM(t), &clock{})
	b := newStack(t, replicas[1], loadCRM(t), &clock{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.svc.Listen(ctx, nil)
	time.Sleep(500 * time.Millisecond) // B's listener connects first
	up := newUpstream(t, nil)

	for _, step := range []func(){
		func() { a.tenant(t, "acme") },
		func() {
			a.install(t, "acme", "crm", "apiKey", map[string]string{"API_URL": up.URL, "API_KEY": "good-key"}, agent)
		},
	} {
		if _, err := b.gw.Resolve(ctx, "acme", "crm"); switchboard.CodeOf(err) != "not_found" {
			t.Fatalf("before: err = %v, want not_found", err)
		}
		step()
	}
	// Well within the 30 s B would otherwise remember it unknown.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := b.gw.Resolve(ctx, "acme", "crm")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B still refuses the instance A created: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
