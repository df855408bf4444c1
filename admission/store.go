package admission

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
)

// Store keeps the tenants' own limits (admission_limits).
type Store struct {
	db *database.DB
}

// NewStore returns the store of the tenants' limits on db.
func NewStore(db *database.DB) *Store { return &Store{db: db} }

// Get returns tenant's own limits; zero Limits when it set none.
func (s *Store) Get(ctx context.Context, tenant switchboard.TenantID) (Limits, error) {
	var raw string
	err := s.db.QueryRowContext(ctx, `SELECT limits FROM admission_limits WHERE tenant_id = $1`, string(tenant)).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return Limits{}, nil
	}
	if err != nil {
		return Limits{}, fmt.Errorf("reading the tenant's limits: %w", err)
	}
	var ls Limits
	if err := json.Unmarshal([]byte(raw), &ls); err != nil {
		return Limits{}, fmt.Errorf("the tenant's stored limits: %w", err)
	}
	return ls, nil
}

// Set stores tenant's own limits; zero Limits removes them (the
// operator's apply). Check them against the operator's first.
func (s *Store) Set(ctx context.Context, tenant switchboard.TenantID, ls Limits) error {
	if ls == (Limits{}) {
		_, err := s.db.ExecContext(ctx, `DELETE FROM admission_limits WHERE tenant_id = $1`, string(tenant))
		return err
	}
	raw, err := json.Marshal(ls)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO admission_limits (tenant_id, limits, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (tenant_id) DO UPDATE SET limits = excluded.limits, updated_at = excluded.updated_at`,
		string(tenant), string(raw), time.Now().UTC())
	return err
}

// All returns every tenant's own limits, by tenant id.
func (s *Store) All(ctx context.Context) (map[string]Limits, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tenant_id, limits FROM admission_limits`)
	if err != nil {
		return nil, fmt.Errorf("reading the tenants' limits: %w", err)
	}
	defer rows.Close()
	out := map[string]Limits{}
	for rows.Next() {
		var id, raw string
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, err
		}
		var ls Limits
		if err := json.Unmarshal([]byte(raw), &ls); err != nil {
			return nil, fmt.Errorf("the stored limits of tenant %s: %w", id, err)
		}
		out[id] = ls
	}
	return out, rows.Err()
}

// TenantLimits are a tenant's limits as its admins see them.
type TenantLimits struct {
	// Operator are the operator's defaults, the most Own may set.
	Operator Limits `json:"operator"`
	// Own are the tenant's own limits (zero fields: the operator's).
	Own Limits `json:"own"`
	// Effective are the limits in force.
	Effective Limits `json:"effective"`
}

var errNoStore = switchboard.E(switchboard.ErrUnavailable, "unavailable", "call limits are not kept by this server")

// Tenant returns tenant's limits.
func (c *Controller) Tenant(ctx context.Context, tenant switchboard.TenantID) (TenantLimits, error) {
	if c == nil || c.opts.Store == nil {
		return TenantLimits{}, errNoStore
	}
	own, err := c.opts.Store.Get(ctx, tenant)
	if err != nil {
		return TenantLimits{}, err
	}
	return TenantLimits{Operator: c.opts.Defaults, Own: own, Effective: own.Within(c.opts.Defaults)}, nil
}

// SetTenant sets tenant's own limits, within the operator's
// (invalid_limits otherwise); zero fields keep the operator's. They apply
// at once on this replica, and within Refresh on the others.
func (c *Controller) SetTenant(ctx context.Context, tenant switchboard.TenantID, own Limits) (TenantLimits, error) {
	if c == nil || c.opts.Store == nil {
		return TenantLimits{}, errNoStore
	}
	if err := own.Check(c.opts.Defaults); err != nil {
		return TenantLimits{}, err
	}
	if err := c.opts.Store.Set(ctx, tenant, own); err != nil {
		return TenantLimits{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	in := make(map[string]Limits, len(*c.limits.Load())+1)
	for k, v := range *c.limits.Load() {
		in[k] = v
	}
	if own == (Limits{}) {
		delete(in, string(tenant))
	} else {
		in[string(tenant)] = own.Within(c.opts.Defaults)
	}
	c.limits.Store(&in)
	c.anyLimits.Store(!c.opts.Defaults.IsZero() || len(in) > 0)
	return TenantLimits{Operator: c.opts.Defaults, Own: own, Effective: own.Within(c.opts.Defaults)}, nil
}
