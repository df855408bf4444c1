package tenants_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

func widgetsRequest(agents ...string) tenants.InstallRequest {
	return tenants.InstallRequest{
		ConnectorID: "widgets", AuthMode: "apiKey",
		Fields: map[string]*secrets.Secret{"API_KEY": sec(canary), "REGION": sec("eu"), "NOTE": sec("note-" + canary)},
		Agents: agents,
	}
}

// TestConcurrentInstalls races first PUTs of one instance, then updates of
// it: every request either succeeds or is a typed 409 (never a driver
// error), exactly one creates, and each success is one revision.
func TestConcurrentInstalls(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, _ := acmeService(t, db)
		race := func(n int, req func(i int) tenants.InstallRequest) (created, ok int) {
			var (
				wg sync.WaitGroup
				mu sync.Mutex
			)
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, c, err := svc.Install(ctx, "acme", "crm", req(i))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
						if c {
							created++
						}
					case errors.Is(err, switchboard.ErrConflict) && code(err) == "instance_changed":
					default:
						t.Errorf("request %d: %v (code %s), want success or instance_changed", i, err, code(err))
					}
				}()
			}
			close(start)
			wg.Wait()
			return created, ok
		}
		created, ok := race(40, func(int) tenants.InstallRequest { return widgetsRequest("a") })
		if created != 1 || ok < 1 {
			t.Fatalf("concurrent first installs: %d created, %d succeeded; want exactly 1 created", created, ok)
		}
		if n := dbtest.Count(t, db, "instances", ""); n != 1 {
			t.Fatalf("%d instance rows", n)
		}
		// Concurrent updates, each to a different allowlist: the
		// revision counts the successful ones exactly.
		_, ok = race(20, func(i int) tenants.InstallRequest { return widgetsRequest(fmt.Sprintf("agent-%d", i)) })
		in, err := svc.Instance(ctx, "acme", "crm")
		if err != nil {
			t.Fatal(err)
		}
		if ok < 1 || in.Revision != int64(1+ok) {
			t.Fatalf("after %d successful concurrent updates the revision is %d, want %d", ok, in.Revision, 1+ok)
		}
	})
}

// TestFirstInstallLosesToAnotherReplica holds another writer's first
// insert of the instance open while PutInstance runs, so that the two
// really race on the unique (tenant, slug): the loser upserts (or, when
// conditional, answers instance_changed), never a duplicate-key error.
func TestFirstInstallLosesToAnotherReplica(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, ten := acmeService(t, db)
		zero := int64(0)
		for i, ifRev := range []*int64{nil, &zero} {
			slug := fmt.Sprintf("crm-%d", i)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO instances (id, tenant_id, slug, connector_id, connector_version, auth_mode,
				agents, revision, created_at, updated_at, auth_state, verify_kind, verify_message, verify_details)
				VALUES ($1, $2, $3, 'widgets', '1.2.3', 'apiKey', '["other"]', 1, $4, $4, 'unverified', '', '', '')`,
				switchboard.NewID("ins_"), string(ten.ID), slug, time.Now().UTC())
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				in      *tenants.Instance
				created bool
				err     error
			}
			done := make(chan result, 1)
			go func() {
				in, created, err := svc.Store().PutInstance(ctx, ten.ID, tenants.InstanceChange{Slug: slug, ConnectorID: "widgets",
					ConnectorVersion: "1.2.3", AuthMode: "apiKey", Agents: []string{"mine"}, IfRevision: ifRev})
				done <- result{in, created, err}
			}()
			time.Sleep(300 * time.Millisecond) // PutInstance is now waiting on the other writer
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if ifRev != nil {
				if !errors.Is(r.err, switchboard.ErrConflict) || code(r.err) != "instance_changed" {
					t.Fatalf("conditional first PUT that lost = %v, want instance_changed", r.err)
				}
				continue
			}
			if r.err != nil || r.created || r.in.Revision != 2 || strings.Join(r.in.Agents, ",") != "mine" {
				t.Fatalf("unconditional first PUT that lost = %+v, %v; want an update to revision 2", r.in, r.err)
			}
		}
	})
}

// TestRepeatedInstallWritesNothing: the same PUT twice leaves revision,
// updated_at and the field rows as they were, and notifies nobody.
func TestRepeatedInstallWritesNothing(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, _ := acmeService(t, db)
		v1, _, err := svc.Install(ctx, "acme", "crm", widgetsRequest("b", "a"))
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			changes int
		)
		svc.Subscribe(func(tenants.Change) { mu.Lock(); changes++; mu.Unlock() })
		for range 2 {
			v, created, err := svc.Install(ctx, "acme", "crm", widgetsRequest("a", "b"))
			if err != nil || created {
				t.Fatalf("repeated install = %v, %v", created, err)
			}
			if v.Revision != v1.Revision || !v.UpdatedAt.Equal(v1.UpdatedAt) {
				t.Fatalf("repeated install: revision %d updated %v, want %d %v", v.Revision, v.UpdatedAt, v1.Revision, v1.UpdatedAt)
			}
			if !fieldOf(t, v, "API_KEY").UpdatedAt.Equal(*fieldOf(t, v1, "API_KEY").UpdatedAt) {
				t.Fatal("the unchanged API_KEY row was rewritten")
			}
		}
		// Clearing a field that holds nothing is no change either.
		req := widgetsRequest("a", "b")
		req.Fields = map[string]*secrets.Secret{"BASE_URL": nil}
		if v, _, err := svc.Install(ctx, "acme", "crm", req); err != nil || v.Revision != v1.Revision {
			t.Fatalf("clearing an unset field: %v, revision %d", err, v.Revision)
		}
		mu.Lock()
		if changes != 0 {
			t.Errorf("unchanged installs notified %d changes", changes)
		}
		mu.Unlock()
		// A real change still bumps the revision, once.
		req = widgetsRequest("a")
		req.Fields = map[string]*secrets.Secret{"REGION": sec("us")}
		v, _, err := svc.Install(ctx, "acme", "crm", req)
		if err != nil || v.Revision != v1.Revision+1 || !v.UpdatedAt.After(v1.UpdatedAt) {
			t.Fatalf("changed install: %v, revision %d", err, v.Revision)
		}
	})
}

func TestPatch(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, _ := acmeService(t, db)
		if _, err := svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{}); code(err) != "instance_not_found" {
			t.Fatalf("patching a missing instance = %v", err)
		}
		req := widgetsRequest("a", "b")
		req.AuthMode = "accessToken"
		v1, _, err := svc.Install(ctx, "acme", "crm", req)
		if err != nil {
			t.Fatal(err)
		}
		// Only the fields: auth mode and allowlist stay.
		v, err := svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{Fields: map[string]*secrets.Secret{"REGION": sec("us")}})
		if err != nil || v.AuthMode != "accessToken" || strings.Join(v.Agents, ",") != "a,b" || fieldOf(t, v, "REGION").Value != "us" ||
			v.Revision != v1.Revision+1 || !fieldOf(t, v, "API_KEY").Set {
			t.Fatalf("patch fields = %+v, %v", v, err)
		}
		// Only the agents.
		agents := []string{"c"}
		if v, err = svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{Agents: &agents}); err != nil ||
			strings.Join(v.Agents, ",") != "c" || v.AuthMode != "accessToken" {
			t.Fatalf("patch agents = %+v, %v", v, err)
		}
		// The same patch again changes nothing.
		rev := v.Revision
		if v, err = svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{Agents: &agents}); err != nil || v.Revision != rev {
			t.Fatalf("repeated patch: revision %d, %v; want %d", v.Revision, err, rev)
		}
		// An explicit empty allowlist is allowed.
		empty := []string{}
		if v, err = svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{Agents: &empty}); err != nil || len(v.Agents) != 0 {
			t.Fatalf("patch to an empty allowlist = %+v, %v", v, err)
		}
		// Bad values are refused like on install, and change nothing.
		bad := "oauth"
		if _, err := svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{AuthMode: &bad}); code(err) != "unsupported_auth_mode" {
			t.Fatalf("patch to an unsupported mode = %v", err)
		}
		if got, _ := svc.Instance(ctx, "acme", "crm"); got.Revision != v.Revision || got.AuthMode != "accessToken" {
			t.Fatalf("a refused patch changed the instance: %+v", got.Instance)
		}
	})
}

// corrupt makes the instance's field row name undecryptable the way it
// happens in production: the ciphertext of another row moved into it.
func corrupt(t *testing.T, db *database.DB, in *tenants.Instance, name, from string) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), `UPDATE secrets SET ciphertext =
		(SELECT ciphertext FROM secrets WHERE tenant_id = $1 AND owner = $2 AND name = $3)
		WHERE tenant_id = $1 AND owner = $2 AND name = $4`, string(in.TenantID), in.SecretOwner(), from, name)
	if err != nil {
		t.Fatal(err)
	}
}

func TestUndecryptableFieldIsIsolated(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		svc, ten := acmeService(t, db)
		for _, slug := range []string{"crm", "other"} {
			if _, _, err := svc.Install(ctx, "acme", slug, widgetsRequest("a")); err != nil {
				t.Fatal(err)
			}
		}
		in, err := svc.Store().Instance(ctx, ten.ID, "crm")
		if err != nil {
			t.Fatal(err)
		}
		corrupt(t, db, in, "API_KEY", "NOTE")
		corrupt(t, db, in, "REGION", "NOTE")

		list, err := svc.ListInstances(ctx, "acme")
		if err != nil || len(list) != 2 {
			t.Fatalf("ListInstances with a bad row = %v, %v", list, err)
		}
		for _, v := range list {
			want := v.Slug == "crm"
			if v.NeedsAttention != want || (len(v.Attention) > 0) != want {
				t.Errorf("%s: needs attention %v %q, want %v", v.Slug, v.NeedsAttention, v.Attention, want)
			}
		}
		v, err := svc.Instance(ctx, "acme", "crm")
		if err != nil {
			t.Fatalf("Instance with a bad row = %v", err)
		}
		if got := v.Undecryptable(); !slices.Equal(got, []string{"API_KEY", "REGION"}) {
			t.Fatalf("undecryptable fields = %v", got)
		}
		if f := fieldOf(t, v, "REGION"); f.State != tenants.FieldUndecryptable || !f.Set || f.Value != "" {
			t.Fatalf("REGION = %+v", f)
		}
		if f := fieldOf(t, v, "NOTE"); f.State != tenants.FieldSet {
			t.Fatalf("NOTE = %+v", f)
		}
		if f := fieldOf(t, v, "BASE_URL"); f.State != tenants.FieldUnset {
			t.Fatalf("BASE_URL = %+v", f)
		}
		for _, a := range v.Attention {
			if strings.Contains(a, canary) || !strings.Contains(a, "field") {
				t.Fatalf("attention %q", a)
			}
		}
		// A change that keeps a bad row is refused, naming the fields,
		// and writes nothing.
		agents := []string{"b"}
		_, err = svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{Agents: &agents})
		if !errors.Is(err, switchboard.ErrConflict) || code(err) != "undecryptable" ||
			!strings.Contains(err.Error(), "API_KEY") || !strings.Contains(err.Error(), "REGION") || strings.Contains(err.Error(), canary) {
			t.Fatalf("patch keeping bad rows = %v", err)
		}
		// Overwriting one and clearing... the other is required: overwrite both.
		v, err = svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{Fields: map[string]*secrets.Secret{
			"API_KEY": sec("new-key"), "REGION": sec("eu")}})
		if err != nil || v.NeedsAttention || len(v.Undecryptable()) != 0 || fieldOf(t, v, "REGION").Value != "eu" {
			t.Fatalf("overwriting the bad rows = %+v, %v", v, err)
		}
		all, err := svc.Store().Secrets().GetAll(ctx, in.TenantID, in.SecretOwner())
		if err != nil || all["API_KEY"].Reveal() != "new-key" {
			t.Fatalf("after overwrite: %v", err)
		}

		// A lost key: the same rows read through a keyring without it.
		lost := newService(t, db)
		list, err = lost.ListInstances(ctx, "acme")
		if err != nil || len(list) != 2 || !list[0].NeedsAttention || !list[1].NeedsAttention {
			t.Fatalf("ListInstances without the key = %v, %v", list, err)
		}
		// A full PUT with every stored field re-entered repairs it.
		req := widgetsRequest("a")
		req.Fields["BASE_URL"] = nil
		if v, _, err := lost.Install(ctx, "acme", "other", req); err != nil || v.NeedsAttention {
			t.Fatalf("re-entering every field without the old key = %+v, %v", v, err)
		}
	})
}

// acmeService returns a service over db with a fresh key, and its tenant
// "acme".
func acmeService(t *testing.T, db *database.DB) (*tenants.Service, *tenants.Tenant) {
	t.Helper()
	svc := newService(t, db)
	ten, err := svc.CreateTenant(context.Background(), "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	return svc, ten
}
