package tenants

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/egress"
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
	// User, with Instance, says that only that user's own values of the
	// instance's user-scope fields changed (see SetUserSettings).
	User string `json:"user,omitempty"`
	// All says that anything cached may be stale: drop it all. Sent when
	// this replica may have missed changes made by others.
	All bool `json:"all,omitempty"`
	// Seq is the change's number in the change log (0 for Change{All:
	// true}), on this replica's own deliveries and on notifications from
	// the others alike: a cache entry read after the change committed
	// already reflects it (database.ChangePosition), and its notification
	// can arrive after such a read, on the replica that made the change
	// too.
	Seq int64 `json:"seq,omitempty"`
}

// ChangesChannel is the Postgres NOTIFY channel changes travel on between
// replicas.
const ChangesChannel = "switchboard_changes"

// Service applies the rules of tenants, instances and callers on top of the
// store: validation against the connector manifest, masking of secret
// values, and change notification for caches.
type Service struct {
	lookPath func(string) (string, error)
	store    *Store
	catalog  Catalog
	verifier atomic.Pointer[verifierBox]

	mu   sync.RWMutex
	subs []func(Change)

	// listener hears the changes other replicas log.
	listener *database.ChangeListener
}

// NewService returns a service over store validating against catalog.
func NewService(store *Store, catalog Catalog) *Service {
	return &Service{store: store, catalog: catalog, listener: store.db.NewChangeListener(ChangesChannel)}
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

// SetLookPath replaces exec.LookPath in the install's check of the
// runtimes mcp_local connectors require (registry.CheckRequires), for
// tests. Call it before serving.
func (s *Service) SetLookPath(fn func(string) (string, error)) { s.lookPath = fn }

// Store returns the underlying store.
func (s *Service) Store() *Store { return s.store }

// Subscribe registers fn to be called after every committed change.
func (s *Service) Subscribe(fn func(Change)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, fn)
}

// delivered tells this replica's subscribers at once of a committed
// change, with its sequence; the store logged it (and, on Postgres,
// notified the other replicas) in the change's own transaction
// (Store.logChange).
func (s *Service) delivered(c Change) {
	s.deliver(c)
}

func (s *Service) deliver(c Change) {
	// The tenants CachedTenant holds go first, so that no subscriber
	// reloads a changed tenant from them.
	switch {
	case c.All:
		s.store.forgetTenant("")
	case c.TenantSlug != "" && c.Instance == "" && c.Caller == "" && c.User == "":
		s.store.forgetTenant(c.TenantSlug)
	}
	s.mu.RLock()
	subs := slices.Clone(s.subs)
	s.mu.RUnlock()
	for _, fn := range subs {
		fn(c)
	}
}

// MarkChanges notes where the change log stands, before anything is
// cached: the listener's first connection then replays the changes made
// since instead of emptying every cache (database.ChangeListener.Mark).
func (s *Service) MarkChanges(ctx context.Context) error { return s.listener.Mark(ctx) }

// Listen delivers the changes other replicas make to this replica's
// subscribers until ctx is done. After every connection of its listener
// it replays the changes logged since the last one it heard (or since
// MarkChanges); only when it cannot (no position known, the log pruned
// past it) does it deliver Change{All: true}. An unparsable notification
// goes to onError and is skipped. It returns at once on the embedded
// store. Run it in its own goroutine.
func (s *Service) Listen(ctx context.Context, onError func(error)) {
	s.listener.Listen(ctx, func(payload string) {
		var c Change
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			if onError != nil {
				onError(fmt.Errorf("skipped an unparsable change of %d bytes: %w", len(payload), err))
			}
			return
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
	// Caches may remember the slug as unknown.
	var c Change
	t, err := s.store.createTenant(ctx, slug, name, &c)
	if err != nil {
		return nil, err
	}
	s.delivered(c)
	return t, nil
}

// SetContextBudget sets the tenant's context budget in bytes of tools/list
// (Tenant.MCPContextBudget); nil returns it to the operator's default.
// A budget out of bounds is ErrInvalid "invalid_context_budget" and
// changes nothing. Every replica drops its cached instances of the tenant.
func (s *Service) SetContextBudget(ctx context.Context, slug string, budget *int) (*Tenant, error) {
	if budget != nil {
		if err := CheckContextBudget(*budget); err != nil {
			return nil, err
		}
	}
	t, err := s.store.Tenant(ctx, slug)
	if err != nil {
		return nil, err
	}
	var c Change
	if err := s.store.setContextBudget(ctx, t, budget, &c); err != nil {
		return nil, err
	}
	s.delivered(c)
	return s.store.Tenant(ctx, slug)
}

// Tenant returns a tenant by slug.
func (s *Service) Tenant(ctx context.Context, slug string) (*Tenant, error) {
	return s.store.Tenant(ctx, slug)
}

// ListTenants returns every tenant.
func (s *Service) ListTenants(ctx context.Context) ([]*Tenant, error) {
	return s.store.ListTenants(ctx)
}

// TenantsPage returns one page of the tenants, by slug, and the cursor of
// the next page.
func (s *Service) TenantsPage(ctx context.Context, q switchboard.PageQuery) ([]*Tenant, string, error) {
	return s.store.TenantsPage(ctx, q)
}

// InstallRequest is the desired state of an instance: it replaces the
// connector, auth mode and agent allowlist (an empty Agents is an empty
// allowlist). Fields maps a field name to its value; a JSON null (or an
// empty string) clears the stored value; a field that is absent keeps its
// stored value, so secrets need not be re-entered.
type InstallRequest struct {
	ConnectorID string                     `json:"connector_id"`
	AuthMode    string                     `json:"auth_mode"`
	Fields      map[string]*secrets.Secret `json:"fields,omitempty"`
	Agents      []string                   `json:"agents"`
	// ToolsMode is the instance endpoint's tools mode (ToolsAuto,
	// ToolsList, ToolsMeta); "" keeps the stored one (ToolsAuto for a new
	// instance).
	ToolsMode string `json:"tools_mode,omitempty"`
}

// Field states of a FieldView.
const (
	FieldSet   = "set"
	FieldUnset = "unset"
	// FieldUndecryptable: a value is stored but does not decrypt (its
	// ciphertext was moved, or the key that sealed it is gone). The field
	// is unusable until a new value is written.
	FieldUndecryptable = "undecryptable"
)

// FieldView describes one field of an instance without revealing secrets.
type FieldView struct {
	Name   string `json:"name"`
	Secret bool   `json:"secret"`
	// Set reports whether a value is stored (even one that does not
	// decrypt); State says which of FieldSet, FieldUnset and
	// FieldUndecryptable the field is in.
	Set   bool   `json:"set"`
	State string `json:"state"`
	// Value is shown for fields the manifest does not mark secret.
	Value     string     `json:"value,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	// User marks a field of scope user: each member sets their own value
	// (never shown here, never set by an install).
	User bool `json:"user,omitempty"`
}

// InstanceView is an instance as the admin API shows it.
type InstanceView struct {
	*Instance
	Fields []FieldView `json:"fields"`
	// NeedsAttention is set when something stored with the instance is
	// unusable (a field that does not decrypt); Attention says what, and
	// what to do, one sentence per problem, never a value.
	NeedsAttention bool     `json:"needs_attention"`
	Attention      []string `json:"attention,omitempty"`
}

// Undecryptable returns the names of the view's fields whose stored
// value does not decrypt.
func (v *InstanceView) Undecryptable() []string {
	var out []string
	for _, f := range v.Fields {
		if f.State == FieldUndecryptable {
			out = append(out, f.Name)
		}
	}
	return out
}

// errUndecryptable refuses a change that would keep field rows that do
// not decrypt: the configuration it would verify and save is incomplete.
func errUndecryptable(names []string) error {
	return switchboard.E(switchboard.ErrConflict, "undecryptable",
		"the stored value of field(s) %s cannot be decrypted; send a new value for each (or null to clear it)",
		strings.Join(names, ", "))
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
//
// Installing the configuration the instance already has writes nothing:
// its revision and updated_at stay. A field row that does not decrypt must
// be given a new value (or cleared) by the request, else the install is
// ErrConflict "undecryptable".
func (s *Service) Install(ctx context.Context, tenantSlug, slug string, req InstallRequest) (*InstanceView, bool, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, false, err
	}
	return s.install(ctx, t, slug, req, nil)
}

// InstancePatch changes some properties of an existing instance (merge
// semantics): a nil property keeps its value; Fields work as in
// InstallRequest.
type InstancePatch struct {
	ConnectorID *string                    `json:"connector_id"`
	AuthMode    *string                    `json:"auth_mode"`
	Fields      map[string]*secrets.Secret `json:"fields,omitempty"`
	Agents      *[]string                  `json:"agents"`
	ToolsMode   *string                    `json:"tools_mode"`
}

// Patch applies p to the existing instance slug, with the rules and the
// verification of Install. An instance that does not exist is ErrNotFound;
// one changed by another request between the read and the write is
// ErrConflict "instance_changed".
func (s *Service) Patch(ctx context.Context, tenantSlug, slug string, p InstancePatch) (*InstanceView, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, err
	}
	cur, err := s.store.Instance(ctx, t.ID, slug)
	if err != nil {
		return nil, err
	}
	req := InstallRequest{ConnectorID: cur.ConnectorID, AuthMode: cur.AuthMode, Agents: cur.Agents, Fields: p.Fields}
	if p.ConnectorID != nil {
		req.ConnectorID = *p.ConnectorID
	}
	if p.AuthMode != nil {
		if *p.AuthMode == "" {
			return nil, invalid("unsupported_auth_mode", "auth_mode must name one of the connector's auth modes, not be empty")
		}
		req.AuthMode = *p.AuthMode
	}
	if p.Agents != nil {
		req.Agents = *p.Agents
	}
	if p.ToolsMode != nil {
		if err := CheckToolsMode(*p.ToolsMode); err != nil {
			return nil, err
		}
		req.ToolsMode = *p.ToolsMode
	}
	v, _, err := s.install(ctx, t, slug, req, &cur.Revision)
	return v, err
}

// install is Install for tenant t; when expect is set, the instance must
// still be at revision *expect.
func (s *Service) install(ctx context.Context, t *Tenant, slug string, req InstallRequest, expect *int64) (*InstanceView, bool, error) {
	if !switchboard.ValidSlug(slug) {
		return nil, false, invalid("invalid_slug", "instance slug must be 1-63 lower-case letters, digits and single hyphens")
	}
	conn, ok := s.catalog.Connector(req.ConnectorID)
	if !ok {
		return nil, false, invalid("unknown_connector", "connector %q is not in the catalog", req.ConnectorID)
	}
	m := &conn.Manifest
	if err := registry.CheckRequires(m, s.lookPath); err != nil {
		return nil, false, err
	}
	if req.AuthMode == "" && len(m.Auth.Modes) > 0 {
		req.AuthMode = m.Auth.Modes[0]
	}
	if !m.SupportsMode(req.AuthMode) && !(len(m.Auth.Modes) == 0 && req.AuthMode == "") {
		return nil, false, invalid("unsupported_auth_mode", "connector %s supports auth modes %s, not %q",
			m.ID, strings.Join(m.Auth.Modes, ", "), req.AuthMode)
	}
	if req.ToolsMode != "" {
		if err := CheckToolsMode(req.ToolsMode); err != nil {
			return nil, false, err
		}
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
	var own []string
	for name, v := range req.Fields {
		f, ok := m.Field(name)
		if !ok {
			undeclared = append(undeclared, name)
			continue
		}
		if m.UserField(f) {
			own = append(own, name)
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
	if len(own) > 0 {
		sort.Strings(own)
		return nil, false, invalid("user_field", "field(s) %s of connector %s are each user's own: every member sets their own values (PUT .../instances/%s/settings), an install sets none",
			strings.Join(own, ", "), m.ID, slug)
	}
	check := func(stored map[string]bool) error {
		var missing []string
		for _, f := range m.Env {
			if f.Required && f.Default == "" && !stored[f.Name] && !m.UserField(f) {
				missing = append(missing, f.Name)
			}
		}
		if len(missing) > 0 {
			return invalid("missing_field", "connector %s requires field(s) %s", m.ID, strings.Join(missing, ", "))
		}
		return nil
	}
	pl, err := s.verify(ctx, t, conn, slug, req.AuthMode, agents, set, clear, check, expect)
	if err != nil {
		return nil, false, err
	}
	change := Change{Tenant: t.ID, TenantSlug: t.Slug, Instance: slug}
	in, created, err := s.store.putInstance(ctx, t.ID, InstanceChange{
		Slug: slug, ConnectorID: m.ID, ConnectorVersion: m.Version, AuthMode: req.AuthMode,
		Agents: agents, Set: pl.set, Clear: pl.clear, Check: check,
		AuthState: pl.state, Verification: pl.verification, IfRevision: &pl.rev, ToolsMode: req.ToolsMode,
	}, &change)
	if err != nil {
		return nil, false, err
	}
	if created || in.Revision != pl.rev {
		s.delivered(change)
	}
	view, err := s.view(ctx, in)
	return view, created, err
}

// plan is what an install writes after verification: the field changes
// that actually change something, the auth state and verification to
// save, and the revision the instance was at (0: new), which the write
// must still find.
type plan struct {
	set          map[string]secrets.Secret
	clear        []string
	state        string
	verification Verification
	rev          int64
}

// verify runs the connector's verification with the configuration the
// install would leave: the stored field values with set applied and clear
// removed. Values equal to the stored ones and clears of fields that hold
// nothing are dropped from the plan, so that repeating an install writes
// nothing. When expect is set, the instance must exist at that revision.
func (s *Service) verify(ctx context.Context, t *Tenant, conn *registry.Connector, slug, mode string, agents []string,
	set map[string]secrets.Secret, clear []string, check func(map[string]bool) error, expect *int64) (plan, error) {
	m := &conn.Manifest
	cand := &Instance{TenantID: t.ID, Slug: slug, ConnectorID: m.ID, ConnectorVersion: m.Version, AuthMode: mode, Agents: agents}
	fields := map[string]secrets.Secret{}
	var (
		rev int64
		bad []string
	)
	cur, err := s.store.Instance(ctx, t.ID, slug)
	switch {
	case err == nil:
		rev = cur.Revision
		cand.ID, cand.CreatedAt, cand.Revision = cur.ID, cur.CreatedAt, cur.Revision
		if fields, bad, err = s.store.FieldValues(ctx, cur); err != nil {
			return plan{}, err
		}
	case !errors.Is(err, switchboard.ErrNotFound):
		return plan{}, err
	}
	if expect != nil && rev != *expect {
		return plan{}, errInstanceChanged(slug)
	}
	pl := plan{set: map[string]secrets.Secret{}, rev: rev}
	for name, v := range set {
		if old, ok := fields[name]; !ok || old.Reveal() != v.Reveal() {
			pl.set[name] = v
		}
		fields[name] = v
	}
	for _, name := range clear {
		if _, ok := fields[name]; ok || slices.Contains(bad, name) {
			pl.clear = append(pl.clear, name)
		}
		delete(fields, name)
	}
	bad = slices.DeleteFunc(bad, func(name string) bool {
		_, overwritten := set[name]
		_, declared := m.Field(name)
		return overwritten || slices.Contains(clear, name) || !declared
	})
	if len(bad) > 0 {
		return plan{}, errUndecryptable(bad)
	}
	stored := map[string]bool{}
	for name := range fields {
		stored[name] = true
	}
	if err := check(stored); err != nil {
		return plan{}, err
	}
	if err := checkURLs(m, fields); err != nil {
		return plan{}, err
	}
	if m.Verify == nil {
		pl.state, pl.verification = AuthUnverified, Verification{Message: "not verified: the connector declares no verification; the instance is activated without a test"}
		return pl, nil
	}
	box := s.verifier.Load()
	if box == nil || box.v == nil {
		pl.state, pl.verification = AuthUnverified, Verification{Message: "not verified: verification is not available on this server"}
		return pl, nil
	}
	v, err := box.v.Verify(ctx, Candidate{Tenant: t, Instance: cand, Connector: conn, Fields: fields})
	if err != nil {
		return plan{}, err
	}
	switch {
	case !v.Ran:
		pl.state = AuthUnverified
	case !v.OK:
		msg := v.Message
		if msg == "" {
			msg = "the connector's verification did not pass"
		}
		return plan{}, switchboard.E(switchboard.ErrInvalid, "verification_failed",
			"verification failed, nothing was saved: %s", truncate(msg, 400))
	default:
		pl.state = AuthReady
	}
	pl.verification = v
	return pl, nil
}

// checkURLs validates, when an install saves them rather than at the first
// call, the upstream URLs the connector builds from the instance's fields:
// its base URL and its hosted MCP server's URL must be http(s) URLs with a
// host and no user information. Nothing is resolved. The error names the
// fields the URL is built from and what is wrong, never the URL.
func checkURLs(m *registry.Manifest, fields map[string]secrets.Secret) error {
	templates := []string{m.BaseURL}
	if m.MCPConfig != nil {
		templates = append(templates, m.MCPConfig.URL)
	}
	for _, tmpl := range templates {
		u := registry.Expand(tmpl, m, fields)
		if u == "" {
			continue
		}
		if err := egress.ValidateURL(u); err != nil {
			var names []string
			for _, p := range registry.ScanPlaceholders(tmpl) {
				if p.Name != "" && !slices.Contains(names, p.Name) {
					names = append(names, p.Name)
				}
			}
			from := "the connector's URL"
			if len(names) > 0 {
				from = "the URL built from field(s) " + strings.Join(names, ", ")
			}
			return invalid("invalid_base_url", "%s %v", from, err)
		}
	}
	return nil
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
// and when they were last updated, the others with their value. A field
// whose value does not decrypt is shown as FieldUndecryptable and the
// instance as needing attention.
func (s *Service) view(ctx context.Context, in *Instance) (*InstanceView, error) {
	views, err := s.views(ctx, in.TenantID, []*Instance{in})
	if err != nil {
		return nil, err
	}
	return views[0], nil
}

// views renders instances of one tenant (view) with one read of all
// their field rows.
func (s *Service) views(ctx context.Context, tenant switchboard.TenantID, ins []*Instance) ([]*InstanceView, error) {
	owners := make([]string, len(ins))
	for i, in := range ins {
		owners[i] = in.SecretOwner()
	}
	rows, err := s.store.secrets.RowsOf(ctx, tenant, owners)
	if err != nil {
		return nil, err
	}
	out := make([]*InstanceView, len(ins))
	for i, in := range ins {
		out[i] = s.viewOf(in, rows[owners[i]])
	}
	return out, nil
}

// viewOf renders in with its field rows.
func (s *Service) viewOf(in *Instance, rows []secrets.Row) *InstanceView {
	byName := map[string]secrets.Row{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	v := &InstanceView{Instance: in, Fields: []FieldView{}}
	conn, ok := s.catalog.Connector(in.ConnectorID)
	if !ok {
		return v
	}
	// Every stored row is opened, secret or not, so that one that does
	// not decrypt is reported before a call trips over it.
	values := map[string]secrets.Secret{}
	var bad []string
	for _, r := range rows {
		if val, err := s.store.secrets.Open(in.TenantID, in.SecretOwner(), r.Sealed); err != nil {
			bad = append(bad, r.Name)
		} else {
			values[r.Name] = val
		}
	}
	for _, f := range conn.Manifest.Env {
		fv := FieldView{Name: f.Name, Secret: f.Secret, State: FieldUnset}
		if conn.Manifest.UserField(f) {
			fv.User = true
			v.Fields = append(v.Fields, fv)
			continue
		}
		if row, ok := byName[f.Name]; ok {
			fv.Set, fv.State = true, FieldSet
			at := row.UpdatedAt
			fv.UpdatedAt = &at
			switch {
			case slices.Contains(bad, f.Name):
				fv.State = FieldUndecryptable
				v.NeedsAttention = true
				v.Attention = append(v.Attention, fmt.Sprintf(
					"the stored value of field %s cannot be decrypted (moved ciphertext or lost key): enter it again", f.Name))
			case !f.Secret:
				fv.Value = values[f.Name].Reveal()
			}
		}
		v.Fields = append(v.Fields, fv)
	}
	return v
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
	return switchboard.All(func(q switchboard.PageQuery) ([]*InstanceView, string, error) {
		return s.InstancesPage(ctx, tenantSlug, q)
	})
}

// InstancesPage returns one page of a tenant's instances, by slug, fields
// masked, and the cursor of the next page.
func (s *Service) InstancesPage(ctx context.Context, tenantSlug string, q switchboard.PageQuery) ([]*InstanceView, string, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, "", err
	}
	ins, next, err := s.store.InstancesPage(ctx, t.ID, q)
	if err != nil {
		return nil, "", err
	}
	out, err := s.views(ctx, t.ID, ins)
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// DeleteInstance deletes an instance and its secret rows.
func (s *Service) DeleteInstance(ctx context.Context, tenantSlug, slug string) error {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return err
	}
	change := Change{Tenant: t.ID, TenantSlug: t.Slug, Instance: slug}
	if _, err := s.store.deleteInstance(ctx, t.ID, slug, &change); err != nil {
		return err
	}
	s.delivered(change)
	return nil
}

// CallerRequest describes a credential to issue.
type CallerRequest struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Trusted bool   `json:"trusted"`
	AgentID string `json:"agent_id,omitempty"`
	UserID  string `json:"user_id,omitempty"`
	// UserMode is fixed (the default), header or jwt: see Caller.
	UserMode string `json:"user_mode,omitempty"`
	// ExternalSubjects are users outside the tenant's members the caller
	// may name; "prefix*" names every user id that starts with prefix.
	ExternalSubjects []string `json:"external_subjects,omitempty"`
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
	if err := validUserMode(req); err != nil {
		return nil, secrets.Secret{}, err
	}
	// Caches may remember the new token as unknown.
	change := Change{Tenant: t.ID, TenantSlug: t.Slug}
	c, token, err := s.store.createCaller(ctx, t.ID, Caller{Name: req.Name, Kind: req.Kind, Trusted: req.Trusted, AgentID: req.AgentID,
		UserID: req.UserID, UserMode: req.UserMode, ExternalSubjects: req.ExternalSubjects}, &change)
	if err != nil {
		return nil, secrets.Secret{}, err
	}
	s.delivered(change)
	return c, token, nil
}

// validUserMode checks how the caller of req establishes its user: a
// fixed mode may name a service-account user; header (only for trusted
// callers) and jwt name theirs per request, so carry none.
func validUserMode(req CallerRequest) error {
	switch req.UserMode {
	case "", UserFixed:
	case UserHeader:
		if !req.Trusted {
			return invalid("invalid_user_mode", "user_mode header lets the caller assert any user with X-User-Id: only a trusted caller may have it")
		}
	case UserJWT:
	default:
		return invalid("invalid_user_mode", "user_mode must be %s, %s or %s", UserFixed, UserHeader, UserJWT)
	}
	if req.UserID != "" && req.UserMode != "" && req.UserMode != UserFixed {
		return invalid("invalid_user_mode", "user_id names a fixed user: it goes with user_mode fixed, not %s", req.UserMode)
	}
	if len(req.ExternalSubjects) > MaxExternalSubjects {
		return invalid("invalid_user_id", "external_subjects holds at most %d users", MaxExternalSubjects)
	}
	for _, u := range req.ExternalSubjects {
		if !agentPattern.MatchString(strings.TrimSuffix(u, "*")) {
			return invalid("invalid_user_id", "every external subject must be 1-128 letters, digits or . _ : @ / + -, "+
				"or such a prefix followed by * (every user id that starts with it)")
		}
	}
	return nil
}

// ListCallers returns every caller of a tenant, newest first.
func (s *Service) ListCallers(ctx context.Context, tenantSlug string) ([]*Caller, error) {
	return switchboard.All(func(q switchboard.PageQuery) ([]*Caller, string, error) {
		return s.CallersPage(ctx, tenantSlug, q)
	})
}

// CallersPage returns one page of a tenant's callers, newest first, and
// the cursor of the next page.
func (s *Service) CallersPage(ctx context.Context, tenantSlug string, q switchboard.PageQuery) ([]*Caller, string, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, "", err
	}
	return s.store.CallersPage(ctx, t.ID, q)
}

// RevokeCaller revokes a caller; caches drop it at once.
func (s *Service) RevokeCaller(ctx context.Context, tenantSlug string, id switchboard.CallerID) (*Caller, error) {
	t, err := s.store.Tenant(ctx, tenantSlug)
	if err != nil {
		return nil, err
	}
	change := Change{Tenant: t.ID, TenantSlug: t.Slug, Caller: id}
	c, err := s.store.revokeCaller(ctx, t.ID, id, &change)
	if err != nil {
		return nil, err
	}
	s.delivered(change)
	return c, nil
}
