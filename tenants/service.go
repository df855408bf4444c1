package tenants

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// Catalog is where the service finds connectors; *registry.Catalog is one.
type Catalog interface {
	Connector(id string) (*registry.Connector, bool)
}

// Change tells subscribers that something a cache may hold changed.
type Change struct {
	Tenant     switchboard.TenantID `json:"tenant,omitempty"`
	TenantSlug string               `json:"tenant_slug,omitempty"`
	// Instance is the slug of the changed instance, if any.
	Instance string `json:"instance,omitempty"`
	// Caller is the changed (revoked) caller, if any.
	Caller switchboard.CallerID `json:"caller,omitempty"`
	// All says that anything cached may be stale: drop it all. Sent when
	// this replica may have missed changes made by others.
	All bool `json:"all,omitempty"`
}

// ChangesChannel is the Postgres NOTIFY channel changes travel on between
// replicas.
const ChangesChannel = "switchboard_changes"

// Service applies the rules of tenants, instances and callers on top of the
// store: validation against the connector manifest, masking of secret
// values, and change notification for caches.
type Service struct {
	store    *Store
	catalog  Catalog
	verifier atomic.Pointer[verifierBox]

	mu   sync.RWMutex
	subs []func(Change)

	onNotifyError atomic.Pointer[func(error)]
}

// NewService returns a service over store validating against catalog.
func NewService(store *Store, catalog Catalog) *Service {
	return &Service{store: store, catalog: catalog}
}

// Verifier runs a connector's verification (verify before save) with a
// candidate configuration; *verify.Verifier is one. It reports the outcome
// with its message and details already redacted; an error means the
// verification could not run, and fails the install like a failed one.
type Verifier interface {
	Verify(ctx context.Context, c Candidate) (Verification, error)
}

// Candidate is an instance configuration that is not saved yet.
type Candidate struct {
	Tenant *Tenant
	// Instance is the instance as it would be saved; its ID is empty when
	// it does not exist yet.
	Instance  *Instance
	Connector *registry.Connector
	// Fields are every field value the instance would have.
	Fields map[string]secrets.Secret
}

type verifierBox struct{ v Verifier }

// SetVerifier sets what verifies configurations before Install saves
// them. Without one, instances of connectors that declare a verification
// are activated unverified, and say so.
func (s *Service) SetVerifier(v Verifier) { s.verifier.Store(&verifierBox{v}) }

// Store returns the underlying store.
func (s *Service) Store() *Store { return s.store }

// Subscribe registers fn to be called after every committed change.
func (s *Service) Subscribe(fn func(Change)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, fn)
}

// notify tells this replica's subscribers at once, and the other
// replicas through the store (Postgres NOTIFY; nothing to do on the
// embedded store). The change itself is already committed; a failed
// publication goes to Listen's error handler.
func (s *Service) notify(c Change) {
	s.deliver(c)
	payload, err := json.Marshal(c)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.store.db.Notify(ctx, ChangesChannel, string(payload)); err != nil {
		if onError := s.onNotifyError.Load(); onError != nil {
			(*onError)(err)
		}
	}
}

func (s *Service) deliver(c Change) {
	s.mu.RLock()
	subs := slices.Clone(s.subs)
	s.mu.RUnlock()
	for _, fn := range subs {
		fn(c)
	}
}

// Listen delivers the changes other replicas make to this replica's
// subscribers until ctx is done; after every (re)connection of its
// listener it delivers Change{All: true}, since changes made meanwhile
// were not heard. It returns at once on the embedded store. Run it in its
// own goroutine.
func (s *Service) Listen(ctx context.Context, onError func(error)) {
	if onError != nil {
		s.onNotifyError.Store(&onError)
	}
	s.store.db.Listen(ctx, ChangesChannel, func(payload string) {
		var c Change
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			c = Change{All: true}
		}
		s.deliver(c)
	}, func() { s.deliver(Change{All: true}) }, onError)
}

func invalid(code, format string, args ...any) error {
	return switchboard.E(switchboard.ErrInvalid, code, format, args...)
}

// CreateTenant validates and creates a tenant.
func (s *Service) CreateTenant(ctx context.Context, slug, name string) (*Tenant, error) {
	if !switchboard.ValidSlug(slug) {
		return nil, invalid("invalid_slug", "slug must be 1-63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit")
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = slug
	}
	if len(name) > 200 {
		return nil, invalid("invalid_name", "name must be at most 200 characters")
	}
	return s.store.CreateTenant(ctx, slug, name)
}

// Tenant returns a tenant by slug.
func (s *Service) Tenant(ctx context.Context, slug string) (*Tenant, error) {
	return s.store.Tenant(ctx, slug)
}

// ListTenants returns every tenant.
func (s *Service) ListTenants(ctx context.Context) ([]*Tenant, error) {
	return s.store.ListTenants(ctx)
}

// InstallRequest is the desired state of an instance. Fields maps a field
// name to its value; a JSON null (or an empty string) clears the stored
// value; a field that is absent keeps its stored value, so secrets need not
// be re-entered.
type InstallRequest struct {
	ConnectorID string                     `json:"connector_id"`
	AuthMode    string                     `json:"auth_mode"`
	Fields      map[string]*secrets.Secret `json:"fields,omitempty"`
	Agents      []string                   `json:"agents"`
}

// FieldView describes one field of an instance without revealing secrets.
type FieldView struct {
	Name   string `json:"name"`
	Secret bool   `json:"secret"`
	Set    bool   `json:"set"`
	// Value is shown for fields the manifest does not mark secret.
	Value     string     `json:"value,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// InstanceView is an instance as the admin API shows it.
type InstanceView struct {
	*Instance
	Fields []FieldView `json:"fields"`
}

var agentPattern = regexp.MustCompile(`^[A-Za-z0-9._:@/+-]{1,128}$`)

// MaxAgents bounds an instance's allowlist.
const MaxAgents = 256

// Install creates or updates an instance idempotently. Everything is
// validated before anything is written; a failure writes nothing. Then the
// connector's verification runs with the resulting configuration (the
// stored fields with the request's changes), before anything is
// persisted: when it fails, nothing changes and the error (ErrInvalid
// "verification_failed") says why. An instance whose verification passed
// is AuthReady; one whose connector declares none (or whose verification
// cannot run without a connected user) is activated AuthUnverified, and
// its Verification says why.
func (s *Service) Install(ctx context.Context, tenantSlug, slug string, req InstallRequest) (*InstanceView, bool, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, false, err
	}
	if !switchboard.ValidSlug(slug) {
		return nil, false, invalid("invalid_slug", "instance slug must be 1-63 lower-case letters, digits and single hyphens")
	}
	conn, ok := s.catalog.Connector(req.ConnectorID)
	if !ok {
		return nil, false, invalid("unknown_connector", "connector %q is not in the catalog", req.ConnectorID)
	}
	m := &conn.Manifest
	if req.AuthMode == "" && len(m.Auth.Modes) > 0 {
		req.AuthMode = m.Auth.Modes[0]
	}
	if !m.SupportsMode(req.AuthMode) {
		return nil, false, invalid("unsupported_auth_mode", "connector %s supports auth modes %s, not %q",
			m.ID, strings.Join(m.Auth.Modes, ", "), req.AuthMode)
	}
	if len(req.Agents) > MaxAgents {
		return nil, false, invalid("invalid_agents", "at most %d agents may be listed", MaxAgents)
	}
	agents := make([]string, 0, len(req.Agents))
	for _, a := range req.Agents {
		if !agentPattern.MatchString(a) {
			return nil, false, invalid("invalid_agents", "agent id %q must be 1-128 letters, digits or . _ : @ / + -", truncate(a, 40))
		}
		if !slices.Contains(agents, a) {
			agents = append(agents, a)
		}
	}
	sort.Strings(agents)
	var undeclared []string
	set := map[string]secrets.Secret{}
	var clear []string
	for name, v := range req.Fields {
		if _, ok := m.Field(name); !ok {
			undeclared = append(undeclared, name)
			continue
		}
		if v == nil || v.IsZero() {
			// An empty value is no value: it clears, like null, so a
			// required field cannot be satisfied by "".
			clear = append(clear, name)
			continue
		}
		if len(v.Reveal()) > 16<<10 {
			return nil, false, invalid("invalid_field", "field %s is longer than 16 KiB", name)
		}
		set[name] = *v
	}
	if len(undeclared) > 0 {
		sort.Strings(undeclared)
		return nil, false, invalid("undeclared_field", "connector %s does not declare field(s) %s; it declares %s",
			m.ID, strings.Join(undeclared, ", "), fieldNames(m))
	}
	check := func(stored map[string]bool) error {
		var missing []string
		for _, f := range m.Env {
			if f.Required && f.Default == "" && !stored[f.Name] {
				missing = append(missing, f.Name)
			}
		}
		if len(missing) > 0 {
			return invalid("missing_field", "connector %s requires field(s) %s", m.ID, strings.Join(missing, ", "))
		}
		return nil
	}
	state, verification, rev, err := s.verify(ctx, t, conn, slug, req.AuthMode, agents, set, clear, check)
	if err != nil {
		return nil, false, err
	}
	in, created, err := s.store.PutInstance(ctx, t.ID, InstanceChange{
		Slug: slug, ConnectorID: m.ID, ConnectorVersion: m.Version, AuthMode: req.AuthMode,
		Agents: agents, Set: set, Clear: clear, Check: check,
		AuthState: state, Verification: verification, IfRevision: &rev,
	})
	if err != nil {
		return nil, false, err
	}
	s.notify(Change{Tenant: t.ID, TenantSlug: t.Slug, Instance: slug})
	view, err := s.view(ctx, in)
	return view, created, err
}

// verify runs the connector's verification with the configuration the
// install would leave: the stored field values with set applied and clear
// removed. It returns the auth state and verification to save, and the
// revision the instance was at (0: new), which the write must still find.
func (s *Service) verify(ctx context.Context, t *Tenant, conn *registry.Connector, slug, mode string, agents []string,
	set map[string]secrets.Secret, clear []string, check func(map[string]bool) error) (string, Verification, int64, error) {
	m := &conn.Manifest
	cand := &Instance{TenantID: t.ID, Slug: slug, ConnectorID: m.ID, ConnectorVersion: m.Version, AuthMode: mode, Agents: agents}
	fields := map[string]secrets.Secret{}
	var rev int64
	cur, err := s.store.Instance(ctx, t.ID, slug)
	switch {
	case err == nil:
		rev = cur.Revision
		cand.ID, cand.CreatedAt, cand.Revision = cur.ID, cur.CreatedAt, cur.Revision
		if fields, err = s.store.secrets.GetAll(ctx, t.ID, cur.SecretOwner()); err != nil {
			return "", Verification{}, 0, err
		}
	case !errors.Is(err, switchboard.ErrNotFound):
		return "", Verification{}, 0, err
	}
	for name, v := range set {
		fields[name] = v
	}
	for _, name := range clear {
		delete(fields, name)
	}
	stored := map[string]bool{}
	for name := range fields {
		stored[name] = true
	}
	if err := check(stored); err != nil {
		return "", Verification{}, 0, err
	}
	if m.Verify == nil {
		return AuthUnverified, Verification{Message: "not verified: the connector declares no verification; the instance is activated without a test"}, rev, nil
	}
	box := s.verifier.Load()
	if box == nil || box.v == nil {
		return AuthUnverified, Verification{Message: "not verified: verification is not available on this server"}, rev, nil
	}
	v, err := box.v.Verify(ctx, Candidate{Tenant: t, Instance: cand, Connector: conn, Fields: fields})
	if err != nil {
		return "", Verification{}, 0, err
	}
	switch {
	case !v.Ran:
		return AuthUnverified, v, rev, nil
	case !v.OK:
		msg := v.Message
		if msg == "" {
			msg = "the connector's verification did not pass"
		}
		return "", Verification{}, 0, switchboard.E(switchboard.ErrInvalid, "verification_failed",
			"verification failed, nothing was saved: %s", truncate(msg, 400))
	}
	return AuthReady, v, rev, nil
}

func fieldNames(m *registry.Manifest) string {
	var names []string
	for _, f := range m.Env {
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		return "no fields"
	}
	return strings.Join(names, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// view renders an instance with its fields: secret ones as set / not set
// and when they were last updated, the others with their value.
func (s *Service) view(ctx context.Context, in *Instance) (*InstanceView, error) {
	metas, err := s.store.secrets.List(ctx, in.TenantID, in.SecretOwner())
	if err != nil {
		return nil, err
	}
	byName := map[string]secrets.Meta{}
	for _, m := range metas {
		byName[m.Name] = m
	}
	v := &InstanceView{Instance: in, Fields: []FieldView{}}
	conn, ok := s.catalog.Connector(in.ConnectorID)
	if !ok {
		return v, nil
	}
	var values map[string]secrets.Secret
	for _, f := range conn.Manifest.Env {
		fv := FieldView{Name: f.Name, Secret: f.Secret}
		if meta, ok := byName[f.Name]; ok {
			fv.Set = true
			at := meta.UpdatedAt
			fv.UpdatedAt = &at
			if !f.Secret {
				if values == nil {
					if values, err = s.store.secrets.GetAll(ctx, in.TenantID, in.SecretOwner()); err != nil {
						return nil, err
					}
				}
				fv.Value = values[f.Name].Reveal()
			}
		}
		v.Fields = append(v.Fields, fv)
	}
	return v, nil
}

// Instance returns one instance of a tenant, fields masked.
func (s *Service) Instance(ctx context.Context, tenantSlug, slug string) (*InstanceView, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, err
	}
	in, err := s.store.Instance(ctx, t.ID, slug)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, in)
}

// ListInstances returns a tenant's instances, fields masked.
func (s *Service) ListInstances(ctx context.Context, tenantSlug string) ([]*InstanceView, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, err
	}
	ins, err := s.store.ListInstances(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	out := make([]*InstanceView, 0, len(ins))
	for _, in := range ins {
		v, err := s.view(ctx, in)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// DeleteInstance deletes an instance and its secret rows.
func (s *Service) DeleteInstance(ctx context.Context, tenantSlug, slug string) error {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return err
	}
	if _, err := s.store.DeleteInstance(ctx, t.ID, slug); err != nil {
		return err
	}
	s.notify(Change{Tenant: t.ID, TenantSlug: t.Slug, Instance: slug})
	return nil
}

// CallerRequest describes a credential to issue.
type CallerRequest struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Trusted bool   `json:"trusted"`
	AgentID string `json:"agent_id,omitempty"`
	UserID  string `json:"user_id,omitempty"`
}

// CreateCaller validates and issues a caller credential. The returned
// token is shown once.
func (s *Service) CreateCaller(ctx context.Context, tenantSlug string, req CallerRequest) (*Caller, secrets.Secret, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, secrets.Secret{}, err
	}
	if !ValidKind(req.Kind) {
		return nil, secrets.Secret{}, invalid("invalid_kind", "kind must be %s, %s or %s", KindAgentPlatform, KindCron, KindKnowledgeSync)
	}
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" || len(req.Name) > 200 {
		return nil, secrets.Secret{}, invalid("invalid_name", "name is required and at most 200 characters")
	}
	if req.AgentID != "" && !agentPattern.MatchString(req.AgentID) {
		return nil, secrets.Secret{}, invalid("invalid_agent_id", "agent_id must be 1-128 letters, digits or . _ : @ / + -")
	}
	if req.UserID != "" && !agentPattern.MatchString(req.UserID) {
		return nil, secrets.Secret{}, invalid("invalid_user_id", "user_id must be 1-128 letters, digits or . _ : @ / + -")
	}
	return s.store.CreateCaller(ctx, t.ID, Caller{Name: req.Name, Kind: req.Kind, Trusted: req.Trusted, AgentID: req.AgentID, UserID: req.UserID})
}

// ListCallers returns a tenant's callers.
func (s *Service) ListCallers(ctx context.Context, tenantSlug string) ([]*Caller, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, err
	}
	return s.store.ListCallers(ctx, t.ID)
}

// RevokeCaller revokes a caller; caches drop it at once.
func (s *Service) RevokeCaller(ctx context.Context, tenantSlug string, id switchboard.CallerID) (*Caller, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, err
	}
	c, err := s.store.RevokeCaller(ctx, t.ID, id)
	if err != nil {
		return nil, err
	}
	s.notify(Change{Tenant: t.ID, TenantSlug: t.Slug, Caller: id})
	return c, nil
}
