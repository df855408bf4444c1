// Package verify tests an app instance's configuration before it is
// saved (verify before save): tenants.Service.Install asks the Verifier,
// its tenants.Verifier, for the outcome. Two kinds exist: a declarative
// probe (one operation of an openapi connector, called through the
// gateway's dispatch with the candidate credentials) and a command the
// connector ships, run as a supervised subprocess.
package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// Config wires a Verifier.
type Config struct {
	// Gateway runs declarative probes through the call path's dispatch.
	Gateway *gateway.Gateway
	// Logger receives one line per verification; nil logs nothing.
	Logger *slog.Logger
	// Dir is the private directory under which verification commands get
	// their temporary copy of the connector's files (such as
	// <data dir>/verify). Empty uses the system's temporary directory.
	Dir string
}

// Verifier runs connectors' verify blocks; it is a tenants.Verifier.
type Verifier struct {
	g      *gateway.Gateway
	logger *slog.Logger
	dir    string
}

// New returns a Verifier.
func New(cfg Config) *Verifier {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Verifier{g: cfg.Gateway, logger: logger, dir: cfg.Dir}
}

// VerifyPath is the minimal PATH of a verification command; nothing else
// of Switchboard's environment reaches it.
const VerifyPath = "/usr/local/bin:/usr/bin:/bin"

// Output bounds of a verification command.
const (
	maxVerifyStdout = 64 << 10
	maxVerifyStderr = 8 << 10
	// verifyWaitDelay is how long a command's output pipes may stay open
	// after it exited or was killed (a background child holding them).
	verifyWaitDelay = 500 * time.Millisecond
)

// Verify implements tenants.Verifier: it runs the connector's verify
// block for the candidate configuration and returns the outcome, every
// declared secret value redacted from its message and details. The probe
// runs for modes with static credentials (apiKey, accessToken); modes
// that need a user's grant are not verified, and the outcome says so.
func (vf *Verifier) Verify(ctx context.Context, c tenants.Candidate) (tenants.Verification, error) {
	m := &c.Connector.Manifest
	v := m.Verify
	if v == nil {
		return tenants.Verification{Message: "not verified: the connector declares no verification; the instance is activated without a test"}, nil
	}
	timeout := time.Duration(v.TimeoutSecs) * time.Second
	if v.TimeoutSecs <= 0 {
		timeout = registry.DefaultVerifyTimeout * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	red := registry.NewRedactor(m, c.Fields)
	var (
		out tenants.Verification
		err error
	)
	switch {
	case len(v.Command) > 0:
		out, err = vf.verifyCommand(ctx, c, timeout, red)
	case v.Probe != nil:
		out = vf.verifyProbe(ctx, c)
	default:
		out = tenants.Verification{Message: "not verified: the connector's verification declares neither a command nor a probe"}
	}
	if err != nil {
		return tenants.Verification{}, err
	}
	out.Message = switchboard.BoundMessage(red.String(out.Message))
	if out.Details != nil {
		out.Details, _ = red.Value(out.Details).(map[string]any)
	}
	if out.Ran {
		at := time.Now().UTC()
		out.At = &at
	}
	log := vf.logger.With("tenant", c.Tenant.Slug, "instance", c.Instance.Slug, "connector", m.ID, "mode", c.Instance.AuthMode)
	log.Info("connector verification", "kind", out.Kind, "ran", out.Ran, "ok", out.OK, "message", out.Message,
		"duration_ms", time.Since(start).Milliseconds())
	return out, nil
}

// verifyProbe runs the declarative probe with the candidate's credentials.
func (vf *Verifier) verifyProbe(ctx context.Context, c tenants.Candidate) tenants.Verification {
	mode := c.Instance.AuthMode
	switch mode {
	case registry.ModeAPIKey, registry.ModeAccessToken:
	case registry.ModeOAuth, registry.ModeOAuthCentral:
		return tenants.Verification{Kind: "probe", Message: "not verified: needs a connected user; test the instance once a user has connected"}
	default:
		return tenants.Verification{Kind: "probe", Message: fmt.Sprintf(
			"not verified: auth mode %s obtains its token after saving; test the instance once it is saved", mode)}
	}
	if c.Connector.Spec == nil {
		return tenants.Verification{Kind: "probe", Message: "not verified: probes apply to openapi connectors only"}
	}
	t := &gateway.Target{Tenant: c.Tenant, Instance: c.Instance, Connector: c.Connector}
	p := &auth.Principal{Tenant: c.Tenant.ID, TenantSlug: c.Tenant.Slug, Kind: "operator"}
	res := vf.g.Probe(ctx, t, c.Fields, p)
	return tenants.Verification{Ran: true, OK: res.OK, Kind: "probe", Message: res.Message, Details: res.Details}
}

// verifyCommand runs the connector's verify command in a private copy of
// the connector's verified files, with only the declared variables and a
// minimal PATH in its environment, killed with its whole process group at
// the timeout. Its stdout must be one JSON object {ok, message, details?};
// otherwise its exit status decides.
func (vf *Verifier) verifyCommand(ctx context.Context, c tenants.Candidate, timeout time.Duration, red *registry.Redactor) (tenants.Verification, error) {
	m := &c.Connector.Manifest
	out := tenants.Verification{Ran: true, Kind: "command"}
	argv := make([]string, len(m.Verify.Command))
	for i, a := range m.Verify.Command {
		argv[i] = registry.Expand(a, m, c.Fields)
	}
	dir, cleanup, err := vf.materialise(c.Connector, argv[0])
	if err != nil {
		return out, fmt.Errorf("preparing the verification of connector %s: %w", m.ID, err)
	}
	defer cleanup()
	path, err := verifyProgram(dir, argv[0])
	if err != nil {
		out.Message = err.Error()
		return out, nil
	}

	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Dir = dir
	cmd.Env = verifyEnv(m, c.Fields)
	cmd.Stdin = nil
	stdout := &cappedBuffer{max: maxVerifyStdout}
	stderr := &cappedBuffer{max: maxVerifyStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = verifyWaitDelay
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killProcessGroup(cmd.Process.Pid) }
	start := time.Now()
	if err := cmd.Start(); err != nil {
		out.Message = "the verification command could not be started"
		return out, nil
	}
	waitErr := cmd.Wait()
	// Whatever happened, nothing the command started outlives it.
	killProcessGroup(cmd.Process.Pid)
	out.Details = map[string]any{"duration_ms": time.Since(start).Milliseconds()}
	if ctx.Err() != nil {
		out.Message = fmt.Sprintf("the verification command did not finish within %s and was stopped", timeout)
		out.Details["code"] = "verify_timeout"
		return out, nil
	}
	exit := -1
	if cmd.ProcessState != nil {
		exit = cmd.ProcessState.ExitCode()
	}
	if r, ok := parseVerifyOutput(stdout.Bytes()); ok && !stdout.truncated {
		out.OK = r.OK
		out.Message = r.Message
		if out.Message == "" {
			out.Message = map[bool]string{true: "the verification passed", false: "the verification did not pass"}[r.OK]
		}
		out.Details = r.Details
		return out, nil
	}
	out.Details["exit_code"] = exit
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil && exit == 0:
		out.OK = true
		out.Message = "the verification command exited with status 0"
	case waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay):
		out.Message = "the verification command failed to run"
	default:
		out.Message = fmt.Sprintf("the verification command exited with status %d", exit)
	}
	if tail := lastLine(red.String(stderr.String())); tail != "" && !out.OK {
		out.Details["stderr"] = tail
	}
	return out, nil
}

// verifyResult is the JSON object a verification command prints.
type verifyResult struct {
	OK      bool
	Message string
	Details map[string]any
}

// parseVerifyOutput reads stdout as exactly one JSON object with a
// boolean "ok", an optional string "message" and an optional object
// "details".
func parseVerifyOutput(b []byte) (verifyResult, bool) {
	var raw struct {
		OK      *bool          `json:"ok"`
		Message *string        `json:"message"`
		Details map[string]any `json:"details"`
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace(b)))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw.OK == nil {
		return verifyResult{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return verifyResult{}, false // trailing data
	}
	r := verifyResult{OK: *raw.OK, Details: raw.Details}
	if raw.Message != nil {
		r.Message = *raw.Message
	}
	return r, true
}

// lastLine is the last non-empty line of s, bounded.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = switchboard.BoundMessage(l[:200])
	}
	return strings.ToValidUTF8(l, "?")
}

// verifyEnv is the command's environment: the manifest's declared
// variables that have a value (or a default), and VerifyPath.
func verifyEnv(m *registry.Manifest, fields map[string]secrets.Secret) []string {
	env := []string{"PATH=" + VerifyPath}
	for _, f := range m.Env {
		if f.Name == "PATH" {
			continue
		}
		v := f.Default
		if s, ok := fields[f.Name]; ok && !s.IsZero() {
			v = s.Reveal()
		}
		if v == "" || strings.ContainsRune(v, 0) {
			continue
		}
		env = append(env, f.Name+"="+v)
	}
	return env
}

// verifyProgram resolves the command's program: a path inside the
// connector's folder (one with a slash, relative), an absolute path, or a
// name looked up in VerifyPath — never in Switchboard's own PATH.
func verifyProgram(dir, name string) (string, error) {
	bad := errors.New("the verification command names no program that can be run")
	switch {
	case name == "":
		return "", bad
	case filepath.IsAbs(name):
		return name, nil
	case strings.Contains(name, "/"):
		p := filepath.Join(dir, filepath.FromSlash(name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return "", bad
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(VerifyPath) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("the verification command's program %q is not installed on this server", truncateName(name))
}

func truncateName(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// materialise writes the connector's verified files into a private
// temporary directory (0700) under the verifier's directory; the
// program file, when it is one of them, is made executable. The catalog
// may be embedded or remote, so the files are always the bytes the
// catalog index verified, never read again from disk.
func (vf *Verifier) materialise(conn *registry.Connector, program string) (string, func(), error) {
	base := vf.dir
	if base == "" {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp(base, "verify-"+conn.Manifest.ID+"-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	prog := strings.TrimPrefix(program, "./")
	names := make([]string, 0, len(conn.Files))
	for name := range conn.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			cleanup()
			return "", nil, err
		}
		mode := os.FileMode(0o600)
		if name == prog {
			mode = 0o700
		}
		if err := os.WriteFile(p, conn.Files[name], mode); err != nil {
			cleanup()
			return "", nil, err
		}
	}
	return dir, cleanup, nil
}

// cappedBuffer keeps the first max bytes written to it and discards the
// rest, so that a chatty command cannot exhaust memory.
type cappedBuffer struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
			b.truncated = true
		} else {
			b.buf.Write(p)
		}
	} else if len(p) > 0 {
		b.truncated = true
	}
	return len(p), nil
}

func (b *cappedBuffer) Bytes() []byte  { return b.buf.Bytes() }
func (b *cappedBuffer) String() string { return b.buf.String() }
