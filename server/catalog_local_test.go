package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/registry/mcplocal"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
)

// TestBuiltinLocalConnectors installs the two local connectors the
// built-in catalog ships and calls them as an agent: clock (global) and
// ntfy (user scope: each user's own topic and token, here pointed at a
// loopback ntfy stand-in).
func TestBuiltinLocalConnectors(t *testing.T) {
	t.Parallel()
	npmServer(t, "@modelcontextprotocol/server-everything") // node is needed
	ctx := context.Background()
	var (
		mu  sync.Mutex
		got []string
	)
	ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Title")+" "+string(b))
		mu.Unlock()
	}))
	defer ntfy.Close()
	srv := servertest.Start(t, server.Config{DB: dbtest.SQLite(t), DataDir: t.TempDir(), Local: mcplocal.Config{}})
	if _, err := srv.Tenants().CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"clock", "ntfy"} {
		if _, _, err := srv.Tenants().Install(ctx, "acme", c, tenants.InstallRequest{ConnectorID: c, Agents: []string{"bot"}}); err != nil {
			t.Fatalf("install %s: %v", c, err)
		}
	}
	_, tok, err := srv.Tenants().CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: "agent-platform", Trusted: true, UserMode: "header"})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := srv.Tenants().Tenant(ctx, "acme")
	m, err := srv.Members().AddMember(ctx, members.ActorOperator, acme.ID, "ann@acme.test", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	e := &localEnv{t: t, srv: srv, acme: acme, caller: tok.Reveal()}
	clock := e.session("clock", "bot", m.UserID)
	if res, out := call(t, clock, "now", map[string]any{"timezone": "Asia/Tokyo"}); res.IsError || !strings.Contains(out, "Asia/Tokyo") {
		t.Errorf("clock now = %s", out)
	}
	if res, out := call(t, clock, "now", map[string]any{"timezone": "Mars/Base"}); !res.IsError || !strings.Contains(out, "unknown time zone") {
		t.Errorf("clock with a bad zone = %s", out)
	}

	push := e.session("ntfy", "bot", m.UserID)
	if res, out := call(t, push, "publish", map[string]any{"message": "hi"}); !res.IsError || !strings.Contains(out, "consent_required") {
		t.Errorf("ntfy before the user's settings = %s", out)
	}
	vals := map[string]*secrets.Secret{}
	for k, v := range map[string]string{"NTFY_URL": ntfy.URL, "NTFY_TOPIC": "ann-alerts", "NTFY_TOKEN": "tk_ann_0001"} {
		s := secrets.New(v)
		vals[k] = &s
	}
	if _, err := srv.Tenants().SetUserSettings(ctx, "acme", "ntfy", m.UserID, vals); err != nil {
		t.Fatal(err)
	}
	if res, out := call(t, push, "publish", map[string]any{"message": "build passed", "title": "CI"}); res.IsError || !strings.Contains(out, "published to ann-alerts") {
		t.Errorf("ntfy publish = %s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "/ann-alerts Bearer tk_ann_0001 CI build passed" {
		t.Errorf("the ntfy server got %q", got)
	}
}
