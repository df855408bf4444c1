package auth_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/auth/authztest"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/registry"
)

// outageRig is a rig on a private PostgreSQL cluster the test stops and
// starts.
func outageRig(t *testing.T, as *authztest.Server) (*rig, *dbtest.PostgresServer) {
	t.Helper()
	srv := dbtest.StartPostgres(t)
	return newRig(t, srv.Open(), as), srv
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

// TestRotatedTokenSurvivesStoreDeath: Postgres stops between the token
// endpoint's answer (with a rotated refresh token) and the commit. The
// call waits and succeeds once the store is back, the rotated token is
// what the store then holds (a later refresh by another process works: no
// reuse of the spent one, which the provider would punish by revoking the
// grant), and no token appears in the logs (issue 10 §3).
func TestRotatedTokenSurvivesStoreDeath(t *testing.T) {
	t.Parallel()
	as := authztest.New(t, authztest.Options{})
	r, srv := outageRig(t, as)
	logs := &logtest.Buffer{}
	sec := newSecrets(t, r.db)
	prov := auth.NewProviders(r.db, sec, "http://127.0.0.1:9")
	r.o = auth.NewOAuth(auth.OAuthConfig{DB: r.db, Secrets: sec, Providers: prov, PublicURL: "http://127.0.0.1:9", Now: r.clk.now,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	r.app = auth.NewAppAuth()
	r.o.Register(r.app)
	r.registerCRM()

	// The token endpoint as the server sees it: refresh answers are
	// fetched from the real server, then the database is stopped before
	// they are passed on, and started again 1.5 s later.
	var killed atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		fwd, _ := http.NewRequest("POST", as.TokenURL(), bytes.NewReader(body))
		fwd.Header = req.Header.Clone()
		resp, err := http.DefaultClient.Do(fwd)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(body), "grant_type=refresh_token") && killed.CompareAndSwap(false, true) {
			srv.Stop()
			go func() {
				time.Sleep(1500 * time.Millisecond)
				srv.Start()
			}()
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	t.Cleanup(proxy.Close)
	fields := userFields(as)
	fields[auth.FieldTokenURL] = proxy.URL
	in := r.input(registry.ModeOAuth, fields, "alice")
	r.connectWith(t, in, "alice")

	r.clk.advance(2 * time.Hour)
	start := time.Now()
	if sub, err := r.call(t, in); err != nil || sub != "alice" {
		t.Fatalf("call across the outage = %q, %v", sub, err)
	}
	if !killed.Load() {
		t.Fatal("the refresh did not go through the proxy")
	}
	t.Logf("the call waited %v for the store", time.Since(start).Round(time.Millisecond))

	// Another process, with nothing in memory, refreshes from the store.
	other := replica(t, r.db, as, r.tenant, r.clk)
	other.clk.advance(2 * time.Hour)
	if sub, err := other.call(t, other.input(registry.ModeOAuth, fields, "alice")); err != nil || sub != "alice" {
		t.Fatalf("refresh by another process after the outage = %q, %v (the stored refresh token was the spent one)", sub, err)
	}
	if n := as.TokenRequests("refresh_token"); n != 2 {
		t.Errorf("refresh requests = %d, want 2", n)
	}
	for _, tok := range as.Issued() {
		if strings.Contains(logs.String(), tok) {
			t.Fatalf("a token appears in the logs")
		}
	}
}
