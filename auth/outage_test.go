package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry"
)

// outageRig is a rig on a private PostgreSQL cluster the test stops and
// starts.
func outageRig(t *testing.T, as *authztest.Server) (*rig, *dbtest.PostgresServer) {
	t.Helper()
	srv := dbtest.StartPostgres(t)
	db, err := database.Open(context.Background(), srv.URL(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return newRig(t, db, as), srv
}

// TestWarmUserCallsSurviveOutage: with the store down past the provider
// cache's 30 s, a connected user's warm calls through a platform provider
// keep working on the last provider read (issue 10 §3: 12 of 33 failed).
func TestWarmUserCallsSurviveOutage(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{})
	r, srv := outageRig(t, as)
	r.registerCRM()
	ctx := context.Background()
	if _, _, err := r.prov.Put(ctx, "crmid", auth.ProviderRequest{AuthorizeURL: as.AuthorizeURL(), TokenURL: as.TokenURL()}); err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{auth.FieldClientID: "crm-app", auth.FieldClientSecret: crmSecret}
	in := r.input(registry.ModeOAuth, fields, "alice")
	in.Manifest.Auth.Provider = "crmid"
	r.connectWith(t, in, "alice")
	if _, err := r.call(t, in); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for i := range 4 {
		r.clk.advance(20 * time.Second)
		if sub, err := r.call(t, in); err != nil || sub != "alice" {
			t.Fatalf("warm call %d, %ds into the outage = %q, %v", i, (i+1)*20, sub, err)
		}
	}
	srv.Start()
}
