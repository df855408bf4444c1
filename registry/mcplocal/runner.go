// Package mcplocal runs the stdio MCP servers of connectors of type
// mcp_local: one process per (tenant, instance) for a global connector
// and per (tenant, instance, user) for one with user-scope fields,
// started on first use, reached through the official SDK's
// CommandTransport, stopped after an idle timeout, relaunched after a
// crash with backoff, bounded in count (per tenant and in total), in CPU
// time and memory (rlimits), in output (the SDK's frame limit on stdout,
// a cut on stderr) and in time per call (a call past its timeout kills
// the process with its whole process group).
//
// How a process is launched is a Runner's business: LocalRunner (a
// child process of the server) is the one implemented; a container or
// Kubernetes-pod runner implements the same interface (see Runner).
package mcplocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Key names one process: a tenant's instance, and the user for a
// connector with user-scope fields ("" for a global one).
type Key struct {
	Tenant, Instance, User string
}

// Spec is what a Runner launches: the verified package directory, the
// argv (argv[0] an absolute path), and the only environment the process
// gets besides what the runner adds (PATH, HOME, TMPDIR).
type Spec struct {
	Key Key
	// PackageDir holds the connector's files, verified against the
	// catalog index just before the launch.
	PackageDir string
	Argv       []string
	// Env is the declared environment, "NAME=value", placeholders
	// expanded (user-scope values of Key.User included).
	Env []string
	// Files are written into the process's private directory before it
	// starts (OAuth deliver as file), by relative path; the directory is
	// removed when the process ends.
	Files map[string][]byte
	// Limits bound the process.
	Limits Limits
}

// Limits bound one process.
type Limits struct {
	// CPU is the CPU time (RLIMIT_CPU), rounded up to seconds.
	CPU time.Duration
	// Memory is the data segment size in bytes (RLIMIT_DATA, which
	// bounds heap and anonymous mappings).
	Memory int64
	// Stderr is how much of the process's standard error is kept (for
	// the log when it dies); the rest is cut.
	Stderr int
}

// Process is a launched server.
type Process interface {
	// Transport connects to the server's stdio; it is connected once.
	Transport() sdk.Transport
	// Kill ends the process and everything it started (its process
	// group, its container...), and removes its private files. It may be
	// called more than once.
	Kill()
	// Stderr returns the kept part of the process's standard error.
	Stderr() string
	// PID identifies the process for logs and tests; 0 when the runner
	// has none.
	PID() int
}

// Runner launches the server processes of mcp_local instances. The
// Manager calls Launch with a Spec that is complete and checked (the
// package verified, only declared environment); a Runner must start the
// process in isolation from the others (its own working directory and
// process group for LocalRunner; a container, a pod for others), enforce
// spec.Limits as well as it can, and never log spec.Env or spec.Files
// (they hold secrets).
type Runner interface {
	Launch(ctx context.Context, spec Spec) (Process, error)
}

// LocalRunner runs servers as child processes of the server: each in a
// private working directory under Dir (HOME and TMPDIR point there too),
// in its own process group, with a minimal PATH (the directory of
// argv[0], /usr/bin, /bin), the rlimits of its Spec set by /bin/sh's
// ulimit before it execs the server (so no instruction of the server runs
// unbounded), and no environment variable of the server's own.
type LocalRunner struct {
	// Dir holds the processes' private directories; empty is the
	// system's temporary directory.
	Dir string
}

// Launch implements Runner.
func (r LocalRunner) Launch(ctx context.Context, spec Spec) (Process, error) {
	if len(spec.Argv) == 0 || !filepath.IsAbs(spec.Argv[0]) {
		return nil, errors.New("mcplocal: argv[0] must be an absolute path")
	}
	if r.Dir != "" {
		if err := os.MkdirAll(r.Dir, 0o700); err != nil {
			return nil, err
		}
	}
	work, err := os.MkdirTemp(r.Dir, "mcp-")
	if err != nil {
		return nil, err
	}
	for name, b := range spec.Files {
		p := filepath.Join(work, filepath.FromSlash(name))
		if !filepath.IsLocal(name) {
			os.RemoveAll(work)
			return nil, fmt.Errorf("mcplocal: file %q is not a local path", name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			os.RemoveAll(work)
			return nil, err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			os.RemoveAll(work)
			return nil, err
		}
	}
	// The limits are set by the shell, then the server replaces it
	// (exec), keeping its pid, its process group and its limits. The
	// argv is passed as positional parameters, never parsed by the shell.
	script := "ulimit -c 0"
	if s := int64((spec.Limits.CPU + time.Second - 1) / time.Second); s > 0 {
		script += "; ulimit -t " + strconv.FormatInt(s, 10)
	}
	if kb := spec.Limits.Memory / 1024; kb > 0 {
		script += "; ulimit -d " + strconv.FormatInt(kb, 10)
	}
	script += ` && exec "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, spec.Argv...)...)
	cmd.Dir = work
	path := filepath.Dir(spec.Argv[0]) + ":/usr/bin:/bin"
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + work, "TMPDIR=" + work, "MCP_WORK_DIR=" + work}, spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &cutBuffer{max: spec.Limits.Stderr}
	cmd.Stderr = stderr
	p := &localProcess{cmd: cmd, work: work, stderr: stderr}
	p.transport = &startedTransport{inner: &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}, p: p}
	return p, nil
}

// localProcess is a child process and its private directory.
type localProcess struct {
	cmd       *exec.Cmd
	work      string
	stderr    *cutBuffer
	transport sdk.Transport
	once      sync.Once
	// connected is set once the SDK's command transport has started
	// the process and connected to it.
	connected atomic.Bool
}

func (p *localProcess) Transport() sdk.Transport { return p.transport }
func (p *localProcess) Stderr() string           { return p.stderr.String() }

func (p *localProcess) PID() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill kills the whole process group (the server and whatever it
// started), reaps the server and removes its directory.
func (p *localProcess) Kill() {
	p.once.Do(func() {
		if p.cmd.Process != nil {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			_ = p.cmd.Process.Kill()
			// Reap it, unless the SDK's connection to it was made: its
			// Close waits for the command itself, and exec.Cmd.Wait must
			// not run twice at once (the race detector caught it).
			if !p.connected.Load() {
				go p.cmd.Wait()
			}
		}
		os.RemoveAll(p.work)
	})
}

// startedTransport is the SDK's CommandTransport; a failed start removes
// the private directory.
type startedTransport struct {
	inner *sdk.CommandTransport
	p     *localProcess
}

func (t *startedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		t.p.Kill()
		return c, err
	}
	t.p.connected.Store(true)
	return c, nil
}

// cutBuffer keeps the first max bytes written to it and counts the rest.
type cutBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
	cut int64
}

func (b *cutBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	if len(p) > room {
		b.cut += int64(len(p) - max(room, 0))
	}
	return len(p), nil
}

func (b *cutBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cut > 0 {
		return b.buf.String() + fmt.Sprintf("… (%d bytes cut)", b.cut)
	}
	return b.buf.String()
}
