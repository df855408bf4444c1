package tenants_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

const canary = "canary-tenants-5b1e77-SECRET"

const widgetsSpec = `{
  "openapi": "3.0.3",
  "info": {"title": "Widgets", "version": "1"},
  "servers": [{"url": "https://widgets.example.invalid/v1"}],
  "paths": {
    "/widgets": {
      "get": {"operationId": "listWidgets", "tags": ["widgets"], "responses": {"200": {"description": "ok"}}}
    },
    "/widgets/{id}": {
      "get": {"operationId": "getWidget", "tags": ["widgets"],
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}}}
    }
  }
}`

const widgetsManifest = `{
  "id": "widgets",
  "name": "Widgets",
  "version": "1.2.3",
  "type": "openapi",
  "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey", "accessToken"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY", "token_field": "API_KEY"},
  "env": [
    {"name": "API_KEY", "label": "API key", "required": true, "secret": true},
    {"name": "REGION", "label": "Region", "required": true},
    {"name": "BASE_URL", "label": "Base URL", "required": true, "default": "https://widgets.example.invalid/v1"},
    {"name": "NOTE", "label": "Note", "secret": true}
  ],
  "openapi": "openapi.json",
  "base_url": "{ENV:BASE_URL}"
}`

// testCatalog builds a one-connector catalog in a temporary directory and
// loads it the way the server does.
func testCatalog(t *testing.T) *registry.Catalog {
	t.Helper()
	return registrytest.Load(t, map[string]string{"widgets/connector.json": widgetsManifest, "widgets/openapi.json": widgetsSpec})
}

func newService(t *testing.T, db *database.DB) *tenants.Service {
	t.Helper()
	key := make([]byte, secrets.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	kr, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	return tenants.NewService(tenants.NewStore(db, secrets.NewStore(db, kr)), testCatalog(t))
}

func sec(v string) *secrets.Secret {
	s := secrets.New(v)
	return &s
}

// code returns the machine code of err, or "" when err is nil.
func code(err error) string {
	if err == nil {
		return ""
	}
	return switchboard.CodeOf(err)
}

func TestTenants(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc := newService(t, db)
		a, err := svc.CreateTenant(ctx, "acme", "  Acme Corp ")
		if err != nil {
			t.Fatal(err)
		}
		if a.Name != "Acme Corp" || a.Slug != "acme" || !strings.HasPrefix(string(a.ID), "ten_") || a.CreatedAt.IsZero() {
			t.Fatalf("created %+v", a)
		}
		if b, err := svc.CreateTenant(ctx, "beta", ""); err != nil || b.Name != "beta" {
			t.Fatalf("CreateTenant without a name = %+v, %v; want the slug as name", b, err)
		}
		_, err = svc.CreateTenant(ctx, "acme", "Again")
		if !errors.Is(err, switchboard.ErrConflict) || code(err) != "tenant_exists" {
			t.Fatalf("duplicate slug: %v, want conflict tenant_exists", err)
		}
		for _, bad := range []string{"", "Acme", "a_b", "-a", "a-", "a--b", strings.Repeat("a", 64), "é"} {
			if _, err := svc.CreateTenant(ctx, bad, ""); !errors.Is(err, switchboard.ErrInvalid) {
				t.Errorf("CreateTenant(%q) = %v, want invalid", bad, err)
			}
		}
		if _, err := svc.CreateTenant(ctx, "long", strings.Repeat("n", 201)); code(err) != "invalid_name" {
			t.Errorf("long name: %v", err)
		}
		got, err := svc.Tenant(ctx, "acme")
		if err != nil || got.ID != a.ID || got.Name != a.Name || !got.CreatedAt.Equal(a.CreatedAt) {
			t.Fatalf("Tenant = %+v, %v; want %+v", got, err, a)
		}
		if _, err := svc.Tenant(ctx, "nope"); !errors.Is(err, switchboard.ErrNotFound) || code(err) != "tenant_not_found" {
			t.Fatalf("Tenant(nope) = %v", err)
		}
		list, err := svc.ListTenants(ctx)
		if err != nil || len(list) != 2 || list[0].Slug != "acme" || list[1].Slug != "beta" {
			t.Fatalf("ListTenants = %v, %v", list, err)
		}
	})
}

// counts returns the number of instance rows and secret rows.
func counts(t *testing.T, db *database.DB) (instances, secretRows int) {
	t.Helper()
	return dbtest.Count(t, db, "instances", ""), dbtest.Count(t, db, "secrets", "")
}

func TestInstallValidation(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc := newService(t, db)
		if _, err := svc.CreateTenant(ctx, "acme", ""); err != nil {
			t.Fatal(err)
		}
		good := func() tenants.InstallRequest {
			return tenants.InstallRequest{
				ConnectorID: "widgets", AuthMode: "apiKey",
				Fields: map[string]*secrets.Secret{"API_KEY": sec(canary), "REGION": sec("eu")},
				Agents: []string{"agent-1"},
			}
		}
		tests := []struct {
			name   string
			tenant string
			slug   string
			edit   func(r *tenants.InstallRequest)
			kind   error
			code   string
		}{
			{"undeclared field", "acme", "w", func(r *tenants.InstallRequest) { r.Fields["EXTRA"] = sec("x") }, switchboard.ErrInvalid, "undeclared_field"},
			{"missing required field", "acme", "w", func(r *tenants.InstallRequest) { delete(r.Fields, "REGION") }, switchboard.ErrInvalid, "missing_field"},
			{"required field cleared", "acme", "w", func(r *tenants.InstallRequest) { r.Fields["API_KEY"] = nil }, switchboard.ErrInvalid, "missing_field"},
			{"required field empty", "acme", "w", func(r *tenants.InstallRequest) { r.Fields["API_KEY"] = sec("") }, switchboard.ErrInvalid, "missing_field"},
			{"unknown connector", "acme", "w", func(r *tenants.InstallRequest) { r.ConnectorID = "nope" }, switchboard.ErrInvalid, "unknown_connector"},
			{"unsupported auth mode", "acme", "w", func(r *tenants.InstallRequest) { r.AuthMode = "oauth" }, switchboard.ErrInvalid, "unsupported_auth_mode"},
			{"invalid agent id", "acme", "w", func(r *tenants.InstallRequest) { r.Agents = []string{"ok", "has space"} }, switchboard.ErrInvalid, "invalid_agents"},
			{"empty agent id", "acme", "w", func(r *tenants.InstallRequest) { r.Agents = []string{""} }, switchboard.ErrInvalid, "invalid_agents"},
			{"too many agents", "acme", "w", func(r *tenants.InstallRequest) {
				r.Agents = nil
				for i := range tenants.MaxAgents + 1 {
					r.Agents = append(r.Agents, "a"+strings.Repeat("x", i%5)+string(rune('a'+i%26)))
				}
			}, switchboard.ErrInvalid, "invalid_agents"},
			{"field too long", "acme", "w", func(r *tenants.InstallRequest) { r.Fields["NOTE"] = sec(strings.Repeat("x", 16<<10+1)) }, switchboard.ErrInvalid, "invalid_field"},
			{"file base URL", "acme", "w", func(r *tenants.InstallRequest) { r.Fields["BASE_URL"] = sec("file:///etc/passwd") }, switchboard.ErrInvalid, "invalid_base_url"},
			{"base URL not a URL", "acme", "w", func(r *tenants.InstallRequest) { r.Fields["BASE_URL"] = sec("not a url") }, switchboard.ErrInvalid, "invalid_base_url"},
			{"base URL with user info", "acme", "w", func(r *tenants.InstallRequest) { r.Fields["BASE_URL"] = sec("https://u:" + canary + "@h.example") }, switchboard.ErrInvalid, "invalid_base_url"},
			{"invalid instance slug", "acme", "Bad_Slug", nil, switchboard.ErrInvalid, "invalid_slug"},
			{"unknown tenant", "nope", "w", nil, switchboard.ErrNotFound, "tenant_not_found"},
		}
		for _, tc := range tests {
			req := good()
			if tc.edit != nil {
				tc.edit(&req)
			}
			_, _, err := svc.Install(ctx, tc.tenant, tc.slug, req)
			if !errors.Is(err, tc.kind) || code(err) != tc.code {
				t.Errorf("%s: Install = %v, want %v %s", tc.name, err, tc.kind, tc.code)
			}
			if err != nil && strings.Contains(err.Error(), canary) {
				t.Errorf("%s: the error holds the secret value", tc.name)
			}
			if ins, secs := counts(t, db); ins != 0 || secs != 0 {
				t.Errorf("%s: wrote %d instance rows and %d secret rows", tc.name, ins, secs)
			}
		}
		// The undeclared-field error names the field and what is declared.
		req := good()
		req.Fields["EXTRA"] = sec("x")
		_, _, err := svc.Install(ctx, "acme", "w", req)
		if e, ok := switchboard.AsError(err); !ok || !strings.Contains(e.Message, "EXTRA") || !strings.Contains(e.Message, "API_KEY") {
			t.Errorf("undeclared field message = %v", err)
		}

		// A failing update leaves the instance as it was.
		v, created, err := svc.Install(ctx, "acme", "w", good())
		if err != nil || !created {
			t.Fatalf("Install = %v, %v", created, err)
		}
		bad := good()
		bad.Fields["API_KEY"] = sec("replaced")
		bad.Fields["NOPE"] = sec("x")
		if _, _, err := svc.Install(ctx, "acme", "w", bad); code(err) != "undeclared_field" {
			t.Fatalf("bad update = %v", err)
		}
		bad = good()
		bad.Fields["API_KEY"] = sec("replaced")
		bad.Fields["REGION"] = nil // clearing a required field fails inside the transaction
		if _, _, err := svc.Install(ctx, "acme", "w", bad); code(err) != "missing_field" {
			t.Fatalf("clearing a required field = %v", err)
		}
		after, err := svc.Instance(ctx, "acme", "w")
		if err != nil || after.Revision != v.Revision {
			t.Fatalf("after failed updates: revision %d, %v; want %d", after.Revision, err, v.Revision)
		}
		in, _ := svc.Store().Instance(ctx, after.TenantID, "w")
		all, err := svc.Store().Secrets().GetAll(ctx, in.TenantID, in.SecretOwner())
		if err != nil || all["API_KEY"].Reveal() != canary || all["REGION"].Reveal() != "eu" {
			t.Fatalf("stored fields changed by failed updates: %v", err)
		}
	})
}

func fieldOf(t *testing.T, v *tenants.InstanceView, name string) tenants.FieldView {
	t.Helper()
	for _, f := range v.Fields {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("field %s not in view", name)
	return tenants.FieldView{}
}

func TestInstallLifecycle(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc := newService(t, db)
		var (
			mu      sync.Mutex
			changes []tenants.Change
		)
		svc.Subscribe(func(c tenants.Change) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, c)
		})
		lastChange := func() tenants.Change {
			mu.Lock()
			defer mu.Unlock()
			if len(changes) == 0 {
				t.Fatal("no change notified")
			}
			c := changes[len(changes)-1]
			changes = nil
			return c
		}
		acme, err := svc.CreateTenant(ctx, "acme", "")
		if err != nil {
			t.Fatal(err)
		}
		req := tenants.InstallRequest{
			ConnectorID: "widgets",
			Fields:      map[string]*secrets.Secret{"API_KEY": sec(canary), "REGION": sec("eu"), "NOTE": sec("note-" + canary)},
			Agents:      []string{"b-agent", "a-agent", "b-agent"},
		}
		v1, created, err := svc.Install(ctx, "acme", "crm", req)
		if err != nil || !created {
			t.Fatalf("Install = %v, %v", created, err)
		}
		if c := lastChange(); c.Tenant != acme.ID || c.TenantSlug != "acme" || c.Instance != "crm" {
			t.Fatalf("install change = %+v", c)
		}
		if v1.AuthMode != "apiKey" || v1.ConnectorVersion != "1.2.3" || v1.Revision != 1 || v1.TenantID != acme.ID {
			t.Fatalf("installed %+v", v1.Instance)
		}
		if strings.Join(v1.Agents, ",") != "a-agent,b-agent" {
			t.Fatalf("agents = %v, want sorted and deduplicated", v1.Agents)
		}
		if !v1.AllowsAgent("a-agent") || v1.AllowsAgent("c-agent") || v1.AllowsAgent("") {
			t.Fatal("AllowsAgent is wrong")
		}
		// Masking: secret fields say set and when; others show the value.
		key := fieldOf(t, v1, "API_KEY")
		if !key.Secret || !key.Set || key.Value != "" || key.UpdatedAt == nil || key.UpdatedAt.IsZero() {
			t.Fatalf("API_KEY view = %+v", key)
		}
		if r := fieldOf(t, v1, "REGION"); r.Secret || !r.Set || r.Value != "eu" {
			t.Fatalf("REGION view = %+v", r)
		}
		if b := fieldOf(t, v1, "BASE_URL"); b.Set || b.Value != "" {
			t.Fatalf("BASE_URL view = %+v (default, not stored)", b)
		}
		js, err := json.Marshal(v1)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(js), canary) {
			t.Fatalf("the view leaks a secret: %s", js)
		}
		// Nothing in the database holds the value in clear.
		if n := dbtest.Count(t, db, "secrets", "ciphertext = $1", []byte(canary)); n != 0 {
			t.Fatal("plaintext in secrets")
		}

		// Idempotent PUT: same id, created=false, nothing written.
		v2, created, err := svc.Install(ctx, "acme", "crm", req)
		if err != nil || created {
			t.Fatalf("second Install = created %v, %v", created, err)
		}
		if v2.ID != v1.ID || v2.Revision != v1.Revision || !v2.CreatedAt.Equal(v1.CreatedAt) {
			t.Fatalf("second Install = id %s rev %d, want id %s rev %d", v2.ID, v2.Revision, v1.ID, v1.Revision)
		}
		if ins, secs := counts(t, db); ins != 1 || secs != 3 {
			t.Fatalf("rows = %d instances, %d secrets; want 1, 3", ins, secs)
		}

		// Absent fields keep their value; null clears.
		v3, _, err := svc.Install(ctx, "acme", "crm", tenants.InstallRequest{
			ConnectorID: "widgets", AuthMode: "accessToken",
			Fields: map[string]*secrets.Secret{"REGION": sec("us"), "NOTE": nil},
			Agents: []string{"a-agent"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if v3.AuthMode != "accessToken" || strings.Join(v3.Agents, ",") != "a-agent" {
			t.Fatalf("update = %+v", v3.Instance)
		}
		if n := fieldOf(t, v3, "NOTE"); n.Set || n.UpdatedAt != nil {
			t.Fatalf("NOTE after null = %+v, want cleared", n)
		}
		if r := fieldOf(t, v3, "REGION"); r.Value != "us" {
			t.Fatalf("REGION = %+v", r)
		}
		in, err := svc.Store().Instance(ctx, acme.ID, "crm")
		if err != nil {
			t.Fatal(err)
		}
		all, err := svc.Store().Secrets().GetAll(ctx, acme.ID, in.SecretOwner())
		if err != nil || len(all) != 2 || all["API_KEY"].Reveal() != canary {
			t.Fatalf("stored fields = %d, %v; want API_KEY kept, NOTE gone", len(all), err)
		}

		got, err := svc.Instance(ctx, "acme", "crm")
		if err != nil || got.ID != v1.ID || !fieldOf(t, got, "API_KEY").Set {
			t.Fatalf("Instance = %+v, %v", got, err)
		}
		list, err := svc.ListInstances(ctx, "acme")
		if err != nil || len(list) != 1 || list[0].Slug != "crm" {
			t.Fatalf("ListInstances = %v, %v", list, err)
		}

		// Delete removes the instance and its secret rows.
		if err := svc.DeleteInstance(ctx, "acme", "crm"); err != nil {
			t.Fatal(err)
		}
		if c := lastChange(); c.Instance != "crm" || c.Tenant != acme.ID {
			t.Fatalf("delete change = %+v", c)
		}
		if ins, secs := counts(t, db); ins != 0 || secs != 0 {
			t.Fatalf("after delete: %d instances, %d secrets", ins, secs)
		}
		if _, err := svc.Instance(ctx, "acme", "crm"); code(err) != "instance_not_found" {
			t.Fatalf("Instance after delete = %v", err)
		}
		if err := svc.DeleteInstance(ctx, "acme", "crm"); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("second delete = %v", err)
		}
		// Re-installing creates a new instance.
		v4, created, err := svc.Install(ctx, "acme", "crm", req)
		if err != nil || !created || v4.ID == v1.ID || v4.Revision != 1 {
			t.Fatalf("reinstall = %v, %v", created, err)
		}
	})
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc := newService(t, db)
		for _, slug := range []string{"acme", "beta"} {
			if _, err := svc.CreateTenant(ctx, slug, ""); err != nil {
				t.Fatal(err)
			}
			_, _, err := svc.Install(ctx, slug, "crm", tenants.InstallRequest{
				ConnectorID: "widgets",
				Fields:      map[string]*secrets.Secret{"API_KEY": sec("key-" + slug), "REGION": sec("region-" + slug)},
				Agents:      []string{"agent-" + slug},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		a, _ := svc.Instance(ctx, "acme", "crm")
		b, _ := svc.Instance(ctx, "beta", "crm")
		if a.ID == b.ID || a.TenantID == b.TenantID {
			t.Fatal("instances of two tenants share an id")
		}
		if fieldOf(t, a, "REGION").Value != "region-acme" || fieldOf(t, b, "REGION").Value != "region-beta" {
			t.Fatal("field values crossed tenants")
		}
		if !a.AllowsAgent("agent-acme") || a.AllowsAgent("agent-beta") {
			t.Fatal("allowlists crossed tenants")
		}
		for _, slug := range []string{"acme", "beta"} {
			list, err := svc.ListInstances(ctx, slug)
			if err != nil || len(list) != 1 || fieldOf(t, list[0], "REGION").Value != "region-"+slug {
				t.Fatalf("ListInstances(%s) = %v, %v", slug, list, err)
			}
		}
		// The store refuses an instance lookup under the wrong tenant.
		if _, err := svc.Store().Instance(ctx, b.TenantID, "crm"); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Store().Instance(ctx, switchboard.TenantID("ten_other"), "crm"); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("Instance under an unknown tenant = %v", err)
		}
		// Deleting one tenant's instance leaves the other's.
		if err := svc.DeleteInstance(ctx, "acme", "crm"); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Instance(ctx, "beta", "crm"); err != nil {
			t.Fatalf("beta's instance after deleting acme's: %v", err)
		}
		if n := dbtest.Count(t, db, "secrets", "tenant_id = $1", string(b.TenantID)); n != 2 {
			t.Fatalf("beta's secret rows = %d, want 2", n)
		}
		// Callers too: a caller of one tenant is not listed or revocable
		// under the other.
		c, _, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "p", Kind: tenants.KindAgentPlatform})
		if err != nil {
			t.Fatal(err)
		}
		if list, _ := svc.ListCallers(ctx, "beta"); len(list) != 0 {
			t.Fatalf("beta lists acme's callers: %v", list)
		}
		if _, err := svc.RevokeCaller(ctx, "beta", c.ID); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("revoking acme's caller as beta = %v, want not found", err)
		}
	})
}

func TestCallers(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc := newService(t, db)
		var (
			mu      sync.Mutex
			changes []tenants.Change
		)
		svc.Subscribe(func(c tenants.Change) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, c)
		})
		acme, err := svc.CreateTenant(ctx, "acme", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			req  tenants.CallerRequest
			code string
		}{
			{tenants.CallerRequest{Name: "x", Kind: "robot"}, "invalid_kind"},
			{tenants.CallerRequest{Name: "  ", Kind: tenants.KindCron}, "invalid_name"},
			{tenants.CallerRequest{Name: strings.Repeat("n", 201), Kind: tenants.KindCron}, "invalid_name"},
			{tenants.CallerRequest{Name: "x", Kind: tenants.KindCron, AgentID: "bad agent"}, "invalid_agent_id"},
			{tenants.CallerRequest{Name: "x", Kind: tenants.KindCron, UserID: "bad\nuser"}, "invalid_user_id"},
		} {
			if _, _, err := svc.CreateCaller(ctx, "acme", tc.req); code(err) != tc.code {
				t.Errorf("CreateCaller(%+v) = %v, want %s", tc.req, err, tc.code)
			}
		}
		if _, _, err := svc.CreateCaller(ctx, "nope", tenants.CallerRequest{Name: "x", Kind: tenants.KindCron}); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("CreateCaller for an unknown tenant = %v", err)
		}
		if n := dbtest.Count(t, db, "callers", ""); n != 0 {
			t.Fatalf("invalid requests wrote %d callers", n)
		}

		c, tok, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{
			Name: " nightly ", Kind: tenants.KindCron, Trusted: true, AgentID: "cron-agent", UserID: "u1",
		})
		if err != nil {
			t.Fatal(err)
		}
		token := tok.Reveal()
		if !strings.HasPrefix(token, tenants.TokenPrefix) || len(token) < 40 {
			t.Fatalf("token has the wrong shape (len %d)", len(token))
		}
		if c.Name != "nightly" || c.TenantID != acme.ID || !c.Trusted || c.RevokedAt != nil || !strings.HasPrefix(string(c.ID), "cal_") {
			t.Fatalf("caller = %+v", c)
		}
		// Only the hash is stored; no column of any row holds the token.
		if n := dbtest.Count(t, db, "callers", "token_hash = $1", tenants.HashToken(token)); n != 1 {
			t.Fatal("the token's hash is not stored")
		}
		if tenants.HashToken(token) == token {
			t.Fatal("HashToken is the identity")
		}
		if n := dbtest.Count(t, db, "callers", "token_hash = $1 OR name = $1 OR id = $1 OR agent_id = $1 OR user_id = $1", token); n != 0 {
			t.Fatal("a caller row holds the token")
		}
		js, _ := json.Marshal(c)
		if strings.Contains(string(js), token) {
			t.Fatal("the caller's JSON holds the token")
		}

		got, err := svc.Store().CallerByToken(ctx, token)
		if err != nil || got.ID != c.ID || got.AgentID != "cron-agent" || got.UserID != "u1" || !got.Trusted {
			t.Fatalf("CallerByToken = %+v, %v", got, err)
		}
		for _, bad := range []string{"", "sbc_nope", token + "x", strings.TrimPrefix(token, tenants.TokenPrefix)} {
			if _, err := svc.Store().CallerByToken(ctx, bad); !errors.Is(err, switchboard.ErrUnauthorized) {
				t.Errorf("CallerByToken(bad) = %v, want unauthorized", err)
			}
		}
		c2, tok2, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: tenants.KindAgentPlatform})
		if err != nil || tok2.Reveal() == token {
			t.Fatalf("second caller: %v (tokens equal: %v)", err, tok2.Reveal() == token)
		}
		list, err := svc.ListCallers(ctx, "acme")
		if err != nil || len(list) != 2 {
			t.Fatalf("ListCallers = %v, %v", list, err)
		}

		rev, err := svc.RevokeCaller(ctx, "acme", c.ID)
		if err != nil || rev.RevokedAt == nil || rev.ID != c.ID {
			t.Fatalf("RevokeCaller = %+v, %v", rev, err)
		}
		mu.Lock()
		// The tenant's creation, each caller's (caches may remember the
		// new ones unknown), then the revocation, each with its sequence
		// in the change log.
		want := []tenants.Change{{Tenant: acme.ID, TenantSlug: "acme", Seq: 1}, {Tenant: acme.ID, TenantSlug: "acme", Caller: c.ID, Seq: 2},
			{Tenant: acme.ID, TenantSlug: "acme", Caller: c2.ID, Seq: 3}, {Tenant: acme.ID, TenantSlug: "acme", Caller: c.ID, Seq: 4}}
		if !slices.Equal(changes, want) {
			t.Errorf("changes = %+v, want %+v", changes, want)
		}
		mu.Unlock()
		if _, err := svc.Store().CallerByToken(ctx, token); !errors.Is(err, switchboard.ErrUnauthorized) || code(err) != "invalid_credential" {
			t.Fatalf("CallerByToken after revoke = %v, want unauthorized", err)
		}
		if _, err := svc.Store().CallerByToken(ctx, tok2.Reveal()); err != nil {
			t.Fatalf("the other caller stopped working: %v", err)
		}
		again, err := svc.RevokeCaller(ctx, "acme", c.ID)
		if err != nil || !again.RevokedAt.Equal(*rev.RevokedAt) {
			t.Fatalf("second revoke = %+v, %v; want the first revocation time", again, err)
		}
		if _, err := svc.RevokeCaller(ctx, "acme", "cal_nope"); code(err) != "caller_not_found" {
			t.Fatalf("revoking an unknown caller = %v", err)
		}
		_ = c2
	})
}

func TestPutInstanceIfRevision(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc := newService(t, db)
		ten, err := svc.CreateTenant(ctx, "acme", "Acme")
		if err != nil {
			t.Fatal(err)
		}
		rev := func(n int64) *int64 { return &n }
		ch := tenants.InstanceChange{Slug: "shop", ConnectorID: "widgets", ConnectorVersion: "1.2.3", AuthMode: "apiKey",
			Agents: []string{"a"}, AuthState: tenants.AuthReady,
			Verification: tenants.Verification{Ran: true, OK: true, Kind: "command", Message: "fine", Details: map[string]any{"n": 1.0}}}
		for _, tc := range []struct {
			name string
			if_  *int64
			code string
		}{
			{"missing instance expected at 1", rev(1), "instance_changed"},
			{"create at 0", rev(0), ""},
			{"stale revision", rev(0), "instance_changed"},
			{"current revision", rev(1), ""},
			{"unconditional", nil, ""},
		} {
			ch.IfRevision = tc.if_
			ch.Agents = []string{tc.name} // a change each time: identical changes write nothing
			_, _, err := svc.Store().PutInstance(ctx, ten.ID, ch)
			if code(err) != tc.code {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.code)
			}
		}
		in, err := svc.Store().Instance(ctx, ten.ID, "shop")
		if err != nil {
			t.Fatal(err)
		}
		v := in.Verification
		if in.Revision != 3 || in.AuthState != tenants.AuthReady || !v.Ran || !v.OK || v.Kind != "command" || v.Message != "fine" ||
			v.Details["n"] != 1.0 || v.At == nil {
			t.Errorf("instance = %+v", in)
		}
	})
}
