package tenants

import (
	"context"
	"database/sql"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/secrets"
)

// User settings: the values of a connector's user-scope fields
// (registry.Manifest.UserField), which each member sets for themself on
// an instance. They are secret rows of their own owner
// (secrets.UserOwner: tenant, instance, user), written and read only for
// the user they belong to: no admin route reads them, an install never
// sets them, a member's removal deletes them (members.Store.RemoveMember)
// and so does the instance's deletion.

// UserFieldView is one user-scope field as its user sees it: secret
// values are never shown, not even to their owner.
type UserFieldView struct {
	Name        string     `json:"name"`
	Label       string     `json:"label"`
	Description string     `json:"description,omitempty"`
	Secret      bool       `json:"secret"`
	Required    bool       `json:"required"`
	Set         bool       `json:"set"`
	Value       string     `json:"value,omitempty"`
	UpdatedAt   *time.Time `json:"updated_at,omitempty"`
}

// UserSettingsView is one user's settings of an instance. Complete
// reports that every required user-scope field is set, so that calls for
// the user can run.
type UserSettingsView struct {
	Instance string          `json:"instance"`
	User     string          `json:"user_id"`
	Fields   []UserFieldView `json:"fields"`
	Complete bool            `json:"complete"`
}

// maxUserID bounds a user id naming user-scope rows.
const maxUserID = 256

var errNoUserFields = switchboard.E(switchboard.ErrInvalid, "no_user_fields",
	"this app instance's connector has no user-scope fields: there is nothing for each user to set")

func checkUser(user string) error {
	if user == "" {
		return switchboard.E(switchboard.ErrInvalid, "user_required", "user settings belong to a user: use a member's own credential")
	}
	if len(user) > maxUserID || strings.ContainsAny(user, "\x00") {
		return switchboard.E(switchboard.ErrInvalid, "invalid_text", "the user id is longer than %d bytes or holds a NUL byte", maxUserID)
	}
	return nil
}

// userTarget resolves the tenant, instance and manifest of a user
// settings request.
func (s *Service) userTarget(ctx context.Context, tenantSlug, slug, user string) (*Tenant, *Instance, []UserFieldView, error) {
	if err := checkUser(user); err != nil {
		return nil, nil, nil, err
	}
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, nil, nil, err
	}
	in, err := s.store.Instance(ctx, t.ID, slug)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, ok := s.catalog.Connector(in.ConnectorID)
	if !ok {
		return nil, nil, nil, switchboard.E(switchboard.ErrUnavailable, "connector_unavailable",
			"the connector %s of this app instance is not in the catalog", in.ConnectorID)
	}
	m := &conn.Manifest
	var fields []UserFieldView
	for _, f := range m.UserFields() {
		fields = append(fields, UserFieldView{Name: f.Name, Label: f.Label, Description: f.Description, Secret: f.Secret,
			Required: f.Required && f.Default == ""})
	}
	if len(fields) == 0 {
		return nil, nil, nil, errNoUserFields
	}
	return t, in, fields, nil
}

// UserSettings returns user's own settings of the instance: which
// user-scope fields are set, with the values of those not secret.
func (s *Service) UserSettings(ctx context.Context, tenantSlug, slug, user string) (*UserSettingsView, error) {
	t, in, fields, err := s.userTarget(ctx, tenantSlug, slug, user)
	if err != nil {
		return nil, err
	}
	return s.userView(ctx, t, in, user, fields)
}

func (s *Service) userView(ctx context.Context, t *Tenant, in *Instance, user string, fields []UserFieldView) (*UserSettingsView, error) {
	owner := secrets.UserOwner(string(in.ID), user)
	metas, err := s.store.secrets.List(ctx, t.ID, owner)
	if err != nil {
		return nil, err
	}
	v := &UserSettingsView{Instance: in.Slug, User: user, Fields: fields, Complete: true}
	for i := range v.Fields {
		f := &v.Fields[i]
		j := slices.IndexFunc(metas, func(m secrets.Meta) bool { return m.Name == f.Name })
		if j < 0 {
			if f.Required {
				v.Complete = false
			}
			continue
		}
		at := metas[j].UpdatedAt
		f.Set, f.UpdatedAt = true, &at
		if !f.Secret {
			val, err := s.store.secrets.Get(ctx, secrets.Ref{Tenant: t.ID, Owner: owner, Name: f.Name})
			if err != nil {
				return nil, err
			}
			f.Value = val.Reveal()
		}
	}
	return v, nil
}

// SetUserSettings sets (a value) or clears (null or "") user's own values
// of the instance's user-scope fields; fields not named are kept. A name
// that is not a user-scope field of the connector is refused and nothing
// changes. The change is announced (Change.User), so that what a replica
// holds for the user (cached values, a running local server) is dropped.
func (s *Service) SetUserSettings(ctx context.Context, tenantSlug, slug, user string, values map[string]*secrets.Secret) (*UserSettingsView, error) {
	t, in, fields, err := s.userTarget(ctx, tenantSlug, slug, user)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for name, v := range values {
		if !slices.ContainsFunc(fields, func(f UserFieldView) bool { return f.Name == name }) {
			unknown = append(unknown, name)
			continue
		}
		if v != nil && len(v.Reveal()) > 16<<10 {
			return nil, invalid("invalid_field", "field %s is longer than 16 KiB", name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Name
		}
		return nil, invalid("undeclared_field", "field(s) %s are not user-scope fields of this instance; its user-scope fields are %s",
			strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	change := Change{Tenant: t.ID, TenantSlug: t.Slug, Instance: in.Slug, User: user}
	owner := secrets.UserOwner(string(in.ID), user)
	err = s.store.db.InTx(ctx, func(tx *sql.Tx) error {
		for name, v := range values {
			ref := secrets.Ref{Tenant: t.ID, Owner: owner, Name: name}
			if v == nil || v.IsZero() {
				if err := s.store.secrets.DeleteTx(ctx, tx, ref); err != nil {
					return err
				}
				continue
			}
			if err := s.store.secrets.PutTx(ctx, tx, ref, *v); err != nil {
				return err
			}
		}
		return s.store.logChange(ctx, tx, &change)
	})
	if err != nil {
		return nil, err
	}
	s.delivered(change)
	return s.userView(ctx, t, in, user, fields)
}

// DeleteUserSettings deletes every value user set on the instance.
func (s *Service) DeleteUserSettings(ctx context.Context, tenantSlug, slug, user string) error {
	t, in, _, err := s.userTarget(ctx, tenantSlug, slug, user)
	if err != nil {
		return err
	}
	change := Change{Tenant: t.ID, TenantSlug: t.Slug, Instance: in.Slug, User: user}
	err = s.store.db.InTx(ctx, func(tx *sql.Tx) error {
		if err := s.store.secrets.DeleteOwnerTx(ctx, tx, t.ID, secrets.UserOwner(string(in.ID), user)); err != nil {
			return err
		}
		return s.store.logChange(ctx, tx, &change)
	})
	if err != nil {
		return err
	}
	s.delivered(change)
	return nil
}
