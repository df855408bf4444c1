package mcplocal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/mcprelay"
	"github.com/switchboardhq/switchboard/secrets"
)

// Defaults of a Manager's Config.
const (
	DefaultPerTenant   = 64
	DefaultTotal       = 256
	DefaultIdleTimeout = 5 * time.Minute
	DefaultCallTimeout = 60 * time.Second
	DefaultCPU         = 10 * time.Minute
	DefaultMemory      = 1 << 30
	DefaultStderr      = 64 << 10
	// maxBackoff bounds the wait before a crashed server is relaunched.
	maxBackoff = 30 * time.Second
	// maxTools bounds the tools taken from a server.
	maxTools = 1000
)

// Is reports whether conn runs a local stdio MCP server.
func Is(conn *registry.Connector) bool {
	return conn != nil && conn.Manifest.Type == registry.TypeMCPLocal
}

// Config configures a Manager.
type Config struct {
	// Runner launches the processes; nil is a LocalRunner under
	// WorkDir.
	Runner Runner
	// PackageDir holds the connectors' package files, written from the
	// verified catalog and checked against the index at every launch;
	// WorkDir the processes' private directories. Empty: under the
	// system's temporary directory.
	PackageDir, WorkDir string
	// PerTenant and Total bound the running processes (0: defaults).
	// At the bound, the least recently used idle process of the tenant
	// (or of any tenant, for Total) is stopped to make room; when none is
	// idle, the call is refused with local_capacity (retryable).
	PerTenant, Total int
	// IdleTimeout stops a process unused that long; CallTimeout bounds a
	// call, and a server that does not answer in time is killed with its
	// process group.
	IdleTimeout, CallTimeout time.Duration
	// Limits bound every process (zero members: defaults).
	Limits Limits
	Logger *slog.Logger
}

// Manager keeps the running servers of mcp_local instances.
type Manager struct {
	cfg    Config
	runner Runner
	logger *slog.Logger

	mu      sync.Mutex
	procs   map[Key]*proc
	backoff map[Key]backoff
	pkgMu   sync.Mutex
	stop    chan struct{}
	closed  bool
}

type backoff struct {
	failures int
	until    time.Time
	// cause is why the last launch failed (nil after a crash): a call
	// during the pause gets it, so a refusal such as connector_integrity
	// is not hidden behind "failed recently".
	cause error
}

// proc is one running (or starting) server.
type proc struct {
	key     Key
	ready   chan struct{}
	err     error
	process Process
	session *sdk.ClientSession
	tools   *mcprelay.ToolList
	// relay takes the server's notifications to the callers of the
	// requests in flight.
	relay mcprelay.Table
	// guarded by Manager.mu
	inflight int
	lastUsed time.Time
	stopped  bool
	// credential identifies the credential delivered to the process.
	credential string
}

// NewManager returns a manager; Close it to stop every process.
func NewManager(cfg Config) *Manager {
	if cfg.PerTenant <= 0 {
		cfg.PerTenant = DefaultPerTenant
	}
	if cfg.Total <= 0 {
		cfg.Total = DefaultTotal
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Limits.CPU <= 0 {
		cfg.Limits.CPU = DefaultCPU
	}
	if cfg.Limits.Memory <= 0 {
		cfg.Limits.Memory = DefaultMemory
	}
	if cfg.Limits.Stderr <= 0 {
		cfg.Limits.Stderr = DefaultStderr
	}
	if cfg.PackageDir == "" {
		cfg.PackageDir = filepath.Join(os.TempDir(), "switchboard-mcplocal", "packages")
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(os.TempDir(), "switchboard-mcplocal", "run")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	runner := cfg.Runner
	if runner == nil {
		runner = LocalRunner{Dir: cfg.WorkDir}
	}
	m := &Manager{cfg: cfg, runner: runner, logger: logger, procs: map[Key]*proc{}, backoff: map[Key]backoff{}, stop: make(chan struct{})}
	go m.reapIdle()
	return m
}

// Close stops every process.
func (m *Manager) Close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stop)
	}
	m.mu.Unlock()
	m.Stop(func(Key) bool { return true })
}

// Stop stops the processes whose key match selects (an instance that
// changed, a user whose settings changed).
func (m *Manager) Stop(match func(Key) bool) {
	m.mu.Lock()
	var victims []*proc
	for k, p := range m.procs {
		if match(k) {
			victims = append(victims, p)
			m.removeLocked(p)
		}
	}
	m.mu.Unlock()
	for _, p := range victims {
		p.kill()
	}
}

// PackageDir is where the packages' files are written.
func (m *Manager) PackageDir() string { return m.cfg.PackageDir }

// Running returns the keys of the running processes, for tests and
// metrics.
func (m *Manager) Running() []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Key, 0, len(m.procs))
	for k := range m.procs {
		out = append(out, k)
	}
	return out
}

// PID returns the process id of k's process, or 0.
func (m *Manager) PID(k Key) int {
	m.mu.Lock()
	p := m.procs[k]
	m.mu.Unlock()
	if p == nil {
		return 0
	}
	select {
	case <-p.ready:
	default:
		return 0
	}
	if p.process == nil {
		return 0
	}
	return p.process.PID()
}

func (m *Manager) removeLocked(p *proc) {
	p.stopped = true
	if m.procs[p.key] == p {
		delete(m.procs, p.key)
	}
}

func (p *proc) kill() {
	<-p.ready
	if p.session != nil {
		go p.session.Close()
	}
	if p.process != nil {
		p.process.Kill()
	}
}

// reapIdle stops the processes unused for IdleTimeout.
func (m *Manager) reapIdle() {
	every := max(m.cfg.IdleTimeout/4, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		m.mu.Lock()
		var idle []*proc
		for _, p := range m.procs {
			if p.inflight == 0 && now.Sub(p.lastUsed) > m.cfg.IdleTimeout {
				idle = append(idle, p)
				m.removeLocked(p)
			}
		}
		m.mu.Unlock()
		for _, p := range idle {
			m.logger.Info("local MCP server stopped (idle)", "tenant", p.key.Tenant, "instance", p.key.Instance)
			p.kill()
		}
	}
}

// Launch is what the gateway knows about a call's server: the key, the
// connector with its index entry, the field values (the user's own
// included), the files to deliver (OAuth as file) and environment to
// add (OAuth as env), and the redactor of the values.
type Launch struct {
	Key       Key
	Connector *registry.Connector
	Entry     registry.IndexEntry
	Fields    map[string]secrets.Secret
	Files     map[string][]byte
	Env       map[string]secrets.Secret
	Redactor  *secrets.Redactor
	// Credential identifies the delivered credential (a digest of the
	// access token; empty when none is delivered): the token machinery
	// renews a token before it expires, and a call that brings a new one
	// replaces the process holding the old one, so that a server never
	// runs with an expired token. Calls in flight finish on the old one.
	Credential string
}

var errCapacity = switchboard.E(switchboard.ErrUnavailable, "local_capacity",
	"too many local MCP servers are running; retry shortly")

// Tools returns the server's tools, listed once per process.
func (m *Manager) Tools(ctx context.Context, l Launch) ([]*sdk.Tool, error) {
	list, err := m.ToolList(ctx, l)
	if err != nil {
		return nil, err
	}
	return list.Tools, nil
}

// ToolList is Tools with what is worked out from them once per listing
// (mcprelay.ToolList).
func (m *Manager) ToolList(ctx context.Context, l Launch) (*mcprelay.ToolList, error) {
	p, err := m.acquire(ctx, l)
	if err != nil {
		return nil, err
	}
	defer m.release(p)
	m.mu.Lock()
	cached := p.tools
	m.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	var tools []*sdk.Tool
	for tool, err := range p.session.Tools(cctx, nil) {
		if err != nil {
			return nil, m.failed(ctx, cctx, p, l, err)
		}
		if len(tools) == maxTools {
			break
		}
		tools = append(tools, tool)
	}
	list := mcprelay.NewToolList(tools)
	m.mu.Lock()
	p.tools = list
	m.mu.Unlock()
	return list, nil
}

// Call calls a tool of the server and returns its result as the server
// gave it (isError and an input-required result included). A failure is
// a secret-free *registry.UpstreamError. A *mcprelay.Call in ctx
// receives the call's notifications.
func (m *Manager) Call(ctx context.Context, l Launch, params *sdk.CallToolParams) (*sdk.CallToolResult, error) {
	p, err := m.acquire(ctx, l)
	if err != nil {
		return nil, err
	}
	defer m.release(p)
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	res, err := p.session.CallTool(cctx, params)
	if err != nil {
		return nil, m.failed(ctx, cctx, p, l, err)
	}
	m.mu.Lock()
	delete(m.backoff, l.Key)
	m.mu.Unlock()
	return res, nil
}

// failed classifies a failed request to p; a server that did not answer
// within the call timeout, or whose connection broke, is killed.
func (m *Manager) failed(ctx, cctx context.Context, p *proc, l Launch, err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return mcprelay.Refused(je, 0, l.Redactor, "the local MCP server")
	}
	if ctx.Err() != nil {
		// The caller went away: the SDK's client sent the server
		// notifications/cancelled; the server is left running.
		return mcprelay.Cancelled(ctx)
	}
	reason := "its connection broke"
	if cctx.Err() != nil {
		reason = "it did not answer within the call timeout"
	}
	m.mu.Lock()
	m.removeLocked(p)
	m.mu.Unlock()
	p.kill()
	m.logger.Warn("local MCP server killed", "tenant", p.key.Tenant, "instance", p.key.Instance, "reason", reason,
		"stderr", redactString(l.Redactor, p.process.Stderr()))
	return &registry.UpstreamError{Code: "upstream_unavailable",
		Message: "the local MCP server failed (" + reason + ") and was stopped; call again"}
}

func redactString(r *secrets.Redactor, s string) string {
	if r == nil {
		return s
	}
	return r.String(s)
}

func (m *Manager) release(p *proc) {
	m.mu.Lock()
	p.inflight--
	p.lastUsed = time.Now()
	m.mu.Unlock()
}

// acquire returns the running process of l.Key, launching it when there
// is none, counted as in use until release.
func (m *Manager) acquire(ctx context.Context, l Launch) (*proc, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, switchboard.E(switchboard.ErrUnavailable, "upstream_unavailable", "the server is shutting down")
		}
		p := m.procs[l.Key]
		if p != nil && l.Credential != p.credential {
			select {
			case <-p.ready:
				// Its token was renewed: a fresh process gets the new one.
				m.removeLocked(p)
				m.mu.Unlock()
				go func() { m.waitIdle(p); p.kill() }()
				continue
			default:
			}
		}
		if p != nil {
			p.inflight++
			m.mu.Unlock()
			select {
			case <-p.ready:
			case <-ctx.Done():
				m.release(p)
				return nil, ctx.Err()
			}
			if p.err != nil {
				m.release(p)
				return nil, p.err
			}
			return p, nil
		}
		if b, ok := m.backoff[l.Key]; ok && time.Now().Before(b.until) {
			m.mu.Unlock()
			if b.cause != nil {
				return nil, b.cause
			}
			return nil, &registry.UpstreamError{Code: "upstream_unavailable", RetryAfter: time.Until(b.until),
				Message: "the local MCP server failed recently and is restarted after a pause; retry later"}
		}
		victims, err := m.makeRoomLocked(l.Key.Tenant)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		p = &proc{key: l.Key, ready: make(chan struct{}), inflight: 1, lastUsed: time.Now(), credential: l.Credential}
		m.procs[l.Key] = p
		m.mu.Unlock()
		for _, v := range victims {
			v.kill()
		}
		p.err = m.start(ctx, l, p)
		if p.err != nil {
			m.mu.Lock()
			m.removeLocked(p)
			m.failLocked(l.Key, p.err)
			m.mu.Unlock()
		}
		close(p.ready)
		if p.err != nil {
			m.release(p)
			return nil, p.err
		}
		go m.watch(p, l.Redactor)
		return p, nil
	}
}

// waitIdle waits, bounded by the call timeout, until p has no call in
// flight.
func (m *Manager) waitIdle(p *proc) {
	deadline := time.Now().Add(m.cfg.CallTimeout)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		n := p.inflight
		m.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// makeRoomLocked stops, when the tenant's or the total bound is reached,
// the least recently used idle process (of the tenant first); it fails
// with local_capacity when none is idle.
func (m *Manager) makeRoomLocked(tenant string) ([]*proc, error) {
	var victims []*proc
	for {
		inTenant, total := 0, len(m.procs)
		for k := range m.procs {
			if k.Tenant == tenant {
				inTenant++
			}
		}
		full := inTenant >= m.cfg.PerTenant
		if !full && total < m.cfg.Total {
			return victims, nil
		}
		var lru *proc
		for _, p := range m.procs {
			if p.inflight > 0 || (full && p.key.Tenant != tenant) {
				continue
			}
			if lru == nil || p.lastUsed.Before(lru.lastUsed) {
				lru = p
			}
		}
		if lru == nil {
			return victims, errCapacity
		}
		m.removeLocked(lru)
		victims = append(victims, lru)
	}
}

// failLocked records a failed launch (cause) or a crash (nil) of k: the
// next launch waits 1 s, 2 s, 4 s... up to maxBackoff.
func (m *Manager) failLocked(k Key, cause error) {
	b := m.backoff[k]
	b.failures++
	b.cause = cause
	wait := min(time.Second<<min(b.failures-1, 10), maxBackoff)
	b.until = time.Now().Add(wait)
	m.backoff[k] = b
}

// watch waits for p's session to end; an end nobody asked for is a
// crash, which the backoff remembers.
func (m *Manager) watch(p *proc, red *secrets.Redactor) {
	_ = p.session.Wait()
	m.mu.Lock()
	crashed := !p.stopped
	if crashed {
		m.removeLocked(p)
		m.failLocked(p.key, nil)
	}
	m.mu.Unlock()
	p.process.Kill()
	if crashed {
		m.logger.Warn("local MCP server exited", "tenant", p.key.Tenant, "instance", p.key.Instance,
			"stderr", redactString(red, p.process.Stderr()))
	}
}

// start verifies the package, builds the process's spec and connects to
// it.
func (m *Manager) start(ctx context.Context, l Launch, p *proc) error {
	dir, err := m.packageDir(l)
	if err != nil {
		return err
	}
	spec, err := buildSpec(l, dir)
	if err != nil {
		return err
	}
	spec.Limits = m.cfg.Limits
	process, err := m.runner.Launch(ctx, spec)
	if err != nil {
		m.logger.Error("local MCP server not launched", "tenant", l.Key.Tenant, "instance", l.Key.Instance, "err", err.Error())
		return &registry.UpstreamError{Code: "upstream_unavailable", Message: "the local MCP server could not be started"}
	}
	p.process = process
	p.relay.SetRedactor(l.Redactor)
	p.relay.OnToolsChanged(func() {
		m.mu.Lock()
		p.tools = nil
		m.mu.Unlock()
	})
	client := sdk.NewClient(&sdk.Implementation{Name: "switchboard", Version: "1"}, p.relay.Options(sdk.ClientOptions{}))
	p.relay.Install(client)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CallTimeout)
	defer cancel()
	s, err := client.Connect(cctx, p.relay.Transport(process.Transport()), nil)
	if err != nil {
		process.Kill()
		m.logger.Warn("local MCP server did not start", "tenant", l.Key.Tenant, "instance", l.Key.Instance,
			"err", redactString(l.Redactor, err.Error()), "stderr", redactString(l.Redactor, process.Stderr()))
		return &registry.UpstreamError{Code: "upstream_unavailable", Message: "the local MCP server did not start"}
	}
	p.session = s
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are set by the runner and never by a manifest.
var reservedEnv = []string{"PATH", "HOME", "TMPDIR", "MCP_WORK_DIR", "LD_PRELOAD", "LD_LIBRARY_PATH", "NODE_OPTIONS"}

func invalidConfig(format string, args ...any) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_config", format, args...)
}

// buildSpec expands the manifest's command and environment for l. No
// argument may hold a secret value (argv is visible to every user of the
// machine); secrets reach the server through its environment or files.
// argv[0] is a file of the package or a runtime on the server's PATH;
// an argument equal to a package file's path becomes its absolute path.
func buildSpec(l Launch, dir string) (Spec, error) {
	m := &l.Connector.Manifest
	cfg := m.MCPConfig
	if cfg == nil || len(cfg.Command) == 0 {
		return Spec{}, invalidConfig("connector %s declares no mcp_config.command", m.ID)
	}
	listed := func(p string) bool {
		return slices.ContainsFunc(l.Entry.Files, func(f registry.IndexFile) bool { return f.Path == p })
	}
	argv := make([]string, len(cfg.Command))
	for i, a := range cfg.Command {
		for _, ph := range registry.ScanPlaceholders(a) {
			f, ok := m.Field(ph.Name)
			if ph.Kind == registry.PlaceholderSecret || (ok && f.Secret) {
				return Spec{}, invalidConfig("connector %s puts a secret in its command line; secrets go in mcp_config.env", m.ID)
			}
		}
		v := registry.Expand(a, m, l.Fields)
		if strings.ContainsRune(v, 0) {
			return Spec{}, invalidConfig("argument %d of the command holds a NUL byte", i)
		}
		if listed(v) {
			v = filepath.Join(dir, filepath.FromSlash(v))
		}
		argv[i] = v
	}
	if !filepath.IsAbs(argv[0]) {
		if strings.ContainsRune(argv[0], '/') {
			return Spec{}, invalidConfig("the command %q is neither a file of the package nor a runtime's name", argv[0])
		}
		path, err := exec.LookPath(argv[0])
		if err != nil {
			return Spec{}, switchboard.E(switchboard.ErrUnavailable, "requirement_unmet",
				"the runtime %s of this connector is not installed on the server", argv[0])
		}
		argv[0] = path
	}
	var env []string
	names := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !envName.MatchString(k) || slices.Contains(reservedEnv, k) {
			return Spec{}, invalidConfig("mcp_config.env may not set %q", k)
		}
		v := registry.Expand(cfg.Env[k], m, l.Fields)
		if strings.ContainsRune(v, 0) {
			return Spec{}, invalidConfig("the value of %s holds a NUL byte", k)
		}
		env = append(env, k+"="+v)
	}
	extra := make([]string, 0, len(l.Env))
	for k := range l.Env {
		extra = append(extra, k)
	}
	slices.Sort(extra)
	for _, k := range extra {
		if !envName.MatchString(k) || slices.Contains(reservedEnv, k) {
			return Spec{}, invalidConfig("the token may not be delivered in %q", k)
		}
		env = append(env, k+"="+l.Env[k].Reveal())
	}
	return Spec{Key: l.Key, PackageDir: dir, Argv: argv, Env: env, Files: l.Files}, nil
}

// packageDir returns the directory holding the connector's package
// files, writing them from the catalog (verified when it loaded) when
// missing, and checks every file on disk against the size and sha256 of
// the catalog index: a file changed since is refused
// (connector_integrity), and the directory is written afresh at the next
// launch.
func (m *Manager) packageDir(l Launch) (string, error) {
	h := sha256.New()
	for _, f := range l.Entry.Files {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", f.Path, f.SHA256, f.Size)
	}
	dir := filepath.Join(m.cfg.PackageDir, l.Entry.ID+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	m.pkgMu.Lock()
	defer m.pkgMu.Unlock()
	if _, err := os.Stat(dir); err != nil {
		if err := m.writePackage(l, dir); err != nil {
			return "", err
		}
	}
	for _, f := range l.Entry.Files {
		if err := checkFile(filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			m.logger.Error("local MCP server package altered on disk; not launched", "connector", l.Entry.ID, "file", f.Path, "err", err.Error())
			os.RemoveAll(dir)
			return "", switchboard.E(switchboard.ErrInvalid, "connector_integrity",
				"a file of connector %s does not match the catalog index; it was not started", l.Entry.ID)
		}
	}
	return dir, nil
}

func (m *Manager) writePackage(l Launch, dir string) error {
	if err := os.MkdirAll(m.cfg.PackageDir, 0o755); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(m.cfg.PackageDir, ".stage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	for _, f := range l.Entry.Files {
		b, ok := l.Connector.Files[f.Path]
		if !ok {
			return fmt.Errorf("mcplocal: file %s of %s not loaded", f.Path, l.Entry.ID)
		}
		p := filepath.Join(stage, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o555); err != nil {
			return err
		}
	}
	return os.Rename(stage, dir)
}

// checkFile compares a file on disk with its index record.
func checkFile(path string, f registry.IndexFile) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(file, f.Size+1))
	if err != nil {
		return err
	}
	want, _ := hex.DecodeString(f.SHA256)
	if n != f.Size || !bytes.Equal(h.Sum(nil), want) {
		return errors.New("size or sha256 differs from the catalog index")
	}
	return nil
}

// Do runs fn with the server's session, for the MCP methods other than
// tools (resources, prompts, completions), within the call timeout and
// with Call's error classification.
func (m *Manager) Do(ctx context.Context, l Launch, fn func(context.Context, *sdk.ClientSession) error) error {
	p, err := m.acquire(ctx, l)
	if err != nil {
		return err
	}
	defer m.release(p)
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	if err := fn(cctx, p.session); err != nil {
		return m.failed(ctx, cctx, p, l, err)
	}
	return nil
}
