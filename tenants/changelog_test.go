package tenants_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// loggedChanges reads the change log, in order, each change with its
// sequence.
func loggedChanges(t *testing.T, db *database.DB) []tenants.Change {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT seq, payload FROM change_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []tenants.Change
	for rows.Next() {
		var (
			seq     int64
			payload string
			c       tenants.Change
		)
		if err := rows.Scan(&seq, &payload); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			t.Fatalf("logged change %d %q: %v", seq, payload, err)
		}
		c.Seq = seq
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// refuseChangeLog makes every insert into the change log fail, the way a
// crash or a lost connection between the data write and the log write
// would; the returned function undoes it.
func refuseChangeLog(t *testing.T, db *database.DB) func() {
	t.Helper()
	ctx := context.Background()
	stmts := []string{`CREATE TRIGGER refuse_change_log BEFORE INSERT ON change_log BEGIN SELECT RAISE(ABORT, 'change log refused'); END`}
	undo := []string{`DROP TRIGGER refuse_change_log`}
	if db.Dialect.Replicated() {
		stmts = []string{
			`CREATE FUNCTION refuse_change_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'change log refused'; END $$`,
			`CREATE TRIGGER refuse_change_log BEFORE INSERT ON change_log FOR EACH ROW EXECUTE FUNCTION refuse_change_log()`,
		}
		undo = []string{`DROP TRIGGER refuse_change_log ON change_log`, `DROP FUNCTION refuse_change_log()`}
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		t.Helper()
		for _, q := range undo {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestChangeLogIsWrittenWithTheChange checks, on both stores, that every
// kind of published change (tenant create, instance install, patch and
// delete, caller create and revoke) commits its change-log row with it,
// and that a change whose log row cannot be written is rolled back
// whole: no data row, no log row, no delivery on this replica and (on
// Postgres) no notification to another.
func TestChangeLogIsWrittenWithTheChange(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		svc := newService(t, db)
		var (
			mu              sync.Mutex
			local, replica2 []tenants.Change
		)
		svc.Subscribe(func(c tenants.Change) {
			mu.Lock()
			defer mu.Unlock()
			local = append(local, c)
		})
		// Another replica's listener over the same database (Postgres only:
		// Listen returns at once on the embedded store).
		other := tenants.NewService(tenants.NewStore(db, nil), nil)
		other.Subscribe(func(c tenants.Change) {
			mu.Lock()
			defer mu.Unlock()
			replica2 = append(replica2, c)
		})
		go other.Listen(ctx, func(error) {})
		heard := func(want int) []tenants.Change {
			t.Helper()
			if !db.Dialect.Replicated() {
				return nil
			}
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				mu.Lock()
				got := append([]tenants.Change(nil), replica2...)
				mu.Unlock()
				if len(got) >= want {
					return got
				}
				if time.Now().After(deadline) {
					t.Fatalf("the other replica heard %+v, want %d changes", got, want)
				}
			}
		}
		heard(1) // its first connection's Change{All: true}

		// Every kind of change, each followed by its log row.
		ten, err := svc.CreateTenant(ctx, "acme", "")
		if err != nil {
			t.Fatal(err)
		}
		want := []tenants.Change{{Tenant: ten.ID, TenantSlug: "acme"}}
		if _, _, err := svc.Install(ctx, "acme", "crm", widgetsRequest("a")); err != nil {
			t.Fatal(err)
		}
		want = append(want, tenants.Change{Tenant: ten.ID, TenantSlug: "acme", Instance: "crm"})
		if _, err := svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{Fields: map[string]*secrets.Secret{"REGION": sec("us")}}); err != nil {
			t.Fatal(err)
		}
		want = append(want, tenants.Change{Tenant: ten.ID, TenantSlug: "acme", Instance: "crm"})
		// A patch that changes nothing is not a change.
		if _, err := svc.Patch(ctx, "acme", "crm", tenants.InstancePatch{Fields: map[string]*secrets.Secret{}}); err != nil {
			t.Fatal(err)
		}
		c, _, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "c", Kind: tenants.KindCron})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, tenants.Change{Tenant: ten.ID, TenantSlug: "acme", Caller: c.ID})
		if _, err := svc.RevokeCaller(ctx, "acme", c.ID); err != nil {
			t.Fatal(err)
		}
		want = append(want, tenants.Change{Tenant: ten.ID, TenantSlug: "acme", Caller: c.ID})
		if err := svc.DeleteInstance(ctx, "acme", "crm"); err != nil {
			t.Fatal(err)
		}
		want = append(want, tenants.Change{Tenant: ten.ID, TenantSlug: "acme", Instance: "crm"})
		// same checks that got are the changes of want, each with the
		// sequence the change log gave it.
		same := func(what string, got []tenants.Change) {
			t.Helper()
			logged := loggedChanges(t, db)
			if len(got) != len(want) || len(logged) != len(want) {
				t.Fatalf("%s = %+v, want %+v", what, got, want)
			}
			for i := range got {
				w := want[i]
				w.Seq = logged[i].Seq
				if got[i] != w {
					t.Fatalf("%s[%d] = %+v, want %+v", what, i, got[i], w)
				}
			}
		}
		same("change log", loggedChanges(t, db))
		mu.Lock()
		same("delivered on this replica", local)
		mu.Unlock()
		if db.Dialect.Replicated() {
			same("heard by the other replica", heard(1 + len(want))[1:])
		}

		// A change whose log row fails is rolled back with it.
		undo := refuseChangeLog(t, db)
		if _, err := svc.CreateTenant(ctx, "beta", ""); err == nil {
			t.Fatal("created a tenant whose change was not logged")
		}
		if _, _, err := svc.CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "lost", Kind: tenants.KindCron}); err == nil {
			t.Fatal("created a caller whose change was not logged")
		}
		if _, _, err := svc.Install(ctx, "acme", "erp", widgetsRequest("a")); err == nil {
			t.Fatal("installed an instance whose change was not logged")
		}
		undo()
		if n := dbtest.Count(t, db, "tenants", "slug = $1", "beta"); n != 0 {
			t.Errorf("the refused tenant was written (%d rows)", n)
		}
		if n := dbtest.Count(t, db, "callers", "name = $1", "lost"); n != 0 {
			t.Errorf("the refused caller was written (%d rows)", n)
		}
		if n := dbtest.Count(t, db, "instances", "slug = $1", "erp"); n != 0 {
			t.Errorf("the refused instance was written (%d rows)", n)
		}
		same("change log after refused changes", loggedChanges(t, db))
		mu.Lock()
		same("delivered after refused changes", local)
		mu.Unlock()
		// The next committed change is the next one heard: the refused
		// ones were never notified (notifications arrive in commit order).
		gamma, err := svc.CreateTenant(ctx, "gamma", "")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, tenants.Change{Tenant: gamma.ID, TenantSlug: "gamma"})
		same("change log", loggedChanges(t, db))
		if db.Dialect.Replicated() {
			same("heard by the other replica", heard(1 + len(want))[1:])
		}
	})
}
