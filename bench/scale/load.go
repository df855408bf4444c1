package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/bench/rig"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// Names of what the loader writes; the driver derives the same ones.
func tenantSlug(i int) string        { return fmt.Sprintf("t%06d", i) }
func tenantID(i int) string          { return fmt.Sprintf("ten_bench%06d", i) }
func instanceSlug(j int) string      { return fmt.Sprintf("gh-%04d", j) }
func callerToken(i int) string       { return fmt.Sprintf("%sbench-caller-%06d", tenants.TokenPrefix, i) }
func pageTenantSlug(rows int) string { return fmt.Sprintf("rows-%d", rows) }

const (
	benchAgent = "bench-agent"
	// upstreamKey is every instance's GITHUB_TOKEN.
	upstreamKey = "bench-upstream-key"
)

// load fills the migrated database at dbURL directly with SQL (COPY),
// not through the API: n tenants of m GitHub instances (apiKey mode, their
// fields sealed with ring exactly as the secret store seals them), one
// caller per tenant whose token is callerToken(i), and for each entry of
// pageRows a tenant pageTenantSlug(rows) with that many instances and
// audit rows, for the list and audit page times. The first instance is
// installed through tenants.Service, and every other row copies its
// columns, so that the loaded rows are what an install writes.
func load(ctx context.Context, dbURL string, ring *secrets.Keyring, n, m int, pageRows []int, upstreamURL string) error {
	db, err := database.Open(ctx, dbURL, "")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}
	svc, _, err := rig.BuiltinService(db, ring)
	if err != nil {
		return err
	}
	store := svc.Store()
	if _, err := svc.CreateTenant(ctx, "template", ""); err != nil {
		return err
	}
	fields := map[string]string{"GITHUB_TOKEN": upstreamKey, "GITHUB_API_URL": upstreamURL}
	req := tenants.InstallRequest{ConnectorID: "github", AuthMode: "apiKey", Agents: []string{benchAgent},
		Fields: map[string]*secrets.Secret{}}
	for k, v := range fields {
		s := secrets.New(v)
		req.Fields[k] = &s
	}
	tmpl, _, err := svc.Install(ctx, "template", "gh", req)
	if err != nil {
		return fmt.Errorf("installing the template instance: %w", err)
	}
	var agents, authState string
	if err := db.QueryRowContext(ctx, `SELECT agents, auth_state FROM instances WHERE id = $1`, string(tmpl.ID)).
		Scan(&agents, &authState); err != nil {
		return err
	}
	stored, err := store.Secrets().GetAll(ctx, tmpl.TenantID, tmpl.SecretOwner())
	if err != nil {
		return err
	}
	if len(stored) != len(fields) {
		return fmt.Errorf("the template instance stores %d fields, the loader writes %d", len(stored), len(fields))
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	now := time.Now().UTC()
	copyRows := func(table string, cols []string, count int, row func(k int) ([]any, error)) error {
		k := 0
		_, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromFunc(func() ([]any, error) {
			if k == count {
				return nil, nil
			}
			k++
			return row(k - 1)
		}))
		if err != nil {
			return fmt.Errorf("loading %s: %w", table, err)
		}
		return nil
	}

	// Tenants: the n of the working set, then one per page size.
	type tenantRow struct {
		id, slug  string
		instances int
	}
	var ts []tenantRow
	for i := range n {
		ts = append(ts, tenantRow{tenantID(i), tenantSlug(i), m})
	}
	for _, r := range pageRows {
		ts = append(ts, tenantRow{"ten_rows" + fmt.Sprint(r), pageTenantSlug(r), r})
	}
	if err := copyRows("tenants", []string{"id", "slug", "name", "created_at"}, len(ts), func(k int) ([]any, error) {
		return []any{ts[k].id, ts[k].slug, ts[k].slug, now}, nil
	}); err != nil {
		return err
	}
	if err := copyRows("callers", []string{"id", "tenant_id", "name", "kind", "trusted", "agent_id", "user_id",
		"token_hash", "created_at", "user_mode", "external_subjects"}, n, func(i int) ([]any, error) {
		return []any{fmt.Sprintf("cal_bench%06d", i), tenantID(i), "bench", "agent-platform", false, "", "",
			tenants.HashToken(callerToken(i)), now, "fixed", ""}, nil
	}); err != nil {
		return err
	}
	// Instances, tenant by tenant; k counts them across tenants.
	var flat [][2]int // (tenant index in ts, instance index)
	for ti, t := range ts {
		for j := range t.instances {
			flat = append(flat, [2]int{ti, j})
		}
	}
	instanceID := func(k int) string { return fmt.Sprintf("ins_bench%08d", k) }
	if err := copyRows("instances", []string{"id", "tenant_id", "slug", "connector_id", "connector_version",
		"auth_mode", "agents", "revision", "created_at", "updated_at", "auth_state"}, len(flat), func(k int) ([]any, error) {
		t := ts[flat[k][0]]
		return []any{instanceID(k), t.id, instanceSlug(flat[k][1]), tmpl.ConnectorID, tmpl.ConnectorVersion,
			tmpl.AuthMode, agents, int64(1), now, now, authState}, nil
	}); err != nil {
		return err
	}
	// Field rows, sealed per row (the ciphertext is bound to its tenant,
	// owner and name); the page tenants' instances are only listed.
	names := make([]string, 0, len(stored))
	for name := range stored {
		names = append(names, name)
	}
	withFields := n * m
	if err := copyRows("secrets", []string{"tenant_id", "owner", "name", "key_id", "ciphertext", "updated_at"},
		withFields*len(names), func(k int) ([]any, error) {
			inst, name := k/len(names), names[k%len(names)]
			ref := secrets.Ref{Tenant: switchboard.TenantID(ts[flat[inst][0]].id),
				Owner: tenants.InstanceOwner(switchboard.InstanceID(instanceID(inst))), Name: name}
			keyID, ct, err := ring.Seal(ref, []byte(stored[name].Reveal()))
			if err != nil {
				return nil, err
			}
			return []any{string(ref.Tenant), ref.Owner, name, keyID, ct, now}, nil
		}); err != nil {
		return err
	}
	// Audit rows of the page tenants: one a second back from now, spread
	// over ten instances and with a shared timestamp every tenth row.
	for _, r := range pageRows {
		if _, err := conn.Exec(ctx, `INSERT INTO audit_log (id, at, tenant_id, instance, caller_id, agent_id, actor,
			subject, tool, action, outcome, status, latency_us)
			SELECT 'aud_rows' || $1::text || '_' || lpad(g::text, 8, '0'), now() - ((g / 10) * interval '1 second'),
				'ten_rows' || $1::text, 'gh-' || lpad((g % 10)::text, 4, '0'), 'cal_rows', $2, '', '',
				'repositories', 'get', 'ok', 200, 150
			FROM generate_series(1, $3::int) AS g`, fmt.Sprint(r), benchAgent, r); err != nil {
			return fmt.Errorf("loading audit rows: %w", err)
		}
	}
	_, err = conn.Exec(ctx, "ANALYZE")
	return err
}
