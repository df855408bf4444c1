package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// checkerManifest is a connector verified by a command: verify.sh, which
// behaves as its first argument (the BEHAVIOUR field) says.
const checkerManifest = `{
  "id": "checker", "name": "Checker", "version": "1.0.0", "type": "openapi", "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [
    {"name": "API_URL", "label": "API URL", "required": true},
    {"name": "API_KEY", "label": "API key", "required": true, "secret": true},
    {"name": "BEHAVIOUR", "label": "Behaviour", "required": true},
    {"name": "PID_FILE", "label": "Pid file"},
    {"name": "REGION", "label": "Region", "default": "eu"}
  ],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}",
  "verify": {"command": ["sh", "verify.sh", "{ENV:BEHAVIOUR}"], "timeout_secs": 3}
}`

const checkerScript = `#!/bin/sh
case "$1" in
pass) printf '{"ok": true, "message": "authenticated", "details": {"account": "acme"}}\n' ;;
fail) printf '{"ok": false, "message": "the key was refused"}\n' ;;
garbage-ok) echo 'this is { not json'; exit 0 ;;
garbage-fail) echo 'oops'; echo 'it broke' >&2; exit 3 ;;
echo-pass) printf '{"ok": true, "message": "key %s works", "details": {"key": "%s", "nested": ["x%sx"], "%s": 1}}\n' "$API_KEY" "$API_KEY" "$API_KEY" "$API_KEY" ;;
echo-fail) printf '{"ok": false, "message": "key %s refused"}\n' "$API_KEY"; echo "stderr $API_KEY" >&2 ;;
echo-exit) echo "$API_KEY" >&2; exit 1 ;;
env) printf '{"ok": true, "message": "%s", "details": {"pwd": "%s"}}\n' "$(env | cut -d= -f1 | sort | tr '\n' ' ')" "$(pwd)" ;;
hang) echo $$ > "$PID_FILE"; sleep 30 & echo $! >> "$PID_FILE"; wait ;;
*) exit 2 ;;
esac
`

// plainManifest declares no verification.
const plainManifest = `{
  "id": "plain", "name": "Plain", "version": "1.0.0", "type": "openapi", "scope": "global",
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "X-Api-Key", "field": "API_KEY"},
  "env": [{"name": "API_URL", "label": "API URL", "required": true}, {"name": "API_KEY", "label": "API key", "secret": true}],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`

func verifyCatalog(t testing.TB) *registry.Catalog {
	return registrytest.Load(t, map[string]string{
		"checker/connector.json": checkerManifest, "checker/openapi.json": crmSpec, "checker/verify.sh": checkerScript,
		"plain/connector.json": plainManifest, "plain/openapi.json": crmSpec,
		"crm/connector.json": crmManifest, "crm/openapi.json": crmSpec,
	})
}

func fieldsOf(kv map[string]string) map[string]*secrets.Secret {
	out := map[string]*secrets.Secret{}
	for k, v := range kv {
		out[k] = newSecret(v)
	}
	return out
}

func (s *stack) put(connector, instance, mode string, fields map[string]string) (*tenants.InstanceView, error) {
	v, _, err := s.svc.Install(context.Background(), "acme", instance, tenants.InstallRequest{
		ConnectorID: connector, AuthMode: mode, Fields: fieldsOf(fields), Agents: []string{"agent-1"}})
	return v, err
}

// storedFields returns the instance's stored field values, revealed.
func (s *stack) storedFields(t *testing.T, instance string) map[string]string {
	t.Helper()
	ctx := context.Background()
	ten, err := s.svc.Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.svc.Store().Instance(ctx, ten.ID, instance)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := s.svc.Store().Secrets().GetAll(ctx, ten.ID, in.SecretOwner())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range vals {
		out[k] = v.Reveal()
	}
	return out
}

// dumpInstances is every column of every instance row, as text.
func dumpInstances(t *testing.T, db *database.DB) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT slug, auth_state, verify_kind, verify_message, verify_details FROM instances`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var a, c, d, e, f string
		if err := rows.Scan(&a, &c, &d, &e, &f); err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Join([]string{a, c, d, e, f}, " | ") + "\n")
	}
	return b.String()
}

func TestVerifyCommand(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		s := newStack(t, db, verifyCatalog(t), &clock{})
		s.tenant(t, "acme")
		base := func(behaviour, key string) map[string]string {
			return map[string]string{"API_URL": "http://127.0.0.1:1", "API_KEY": key, "BEHAVIOUR": behaviour}
		}

		t.Run("passes", func(t *testing.T) {
			v, err := s.put("checker", "ok", "apiKey", base("pass", "k1"))
			if err != nil {
				t.Fatalf("Install: %v", err)
			}
			vr := v.Verification
			if v.AuthState != tenants.AuthReady || !vr.Ran || !vr.OK || vr.Kind != "command" || vr.Message != "authenticated" ||
				vr.Details["account"] != "acme" || vr.At == nil {
				t.Errorf("view = %s %+v", v.AuthState, vr)
			}
			got, _ := s.svc.Instance(context.Background(), "acme", "ok")
			if got.AuthState != tenants.AuthReady || got.Verification.Message != "authenticated" || got.Verification.Details["account"] != "acme" {
				t.Errorf("stored = %s %+v", got.AuthState, got.Verification)
			}
		})

		t.Run("fails and changes nothing", func(t *testing.T) {
			before, err := s.put("checker", "keep", "apiKey", base("pass", "k1"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.put("checker", "keep", "apiKey", base("fail", "k2"))
			if code(err) != "verification_failed" || !strings.Contains(err.Error(), "the key was refused") {
				t.Fatalf("err = %v", err)
			}
			after, err := s.svc.Instance(context.Background(), "acme", "keep")
			if err != nil {
				t.Fatal(err)
			}
			if after.Revision != before.Revision || after.AuthState != tenants.AuthReady {
				t.Errorf("instance changed: revision %d -> %d, %s", before.Revision, after.Revision, after.AuthState)
			}
			if f := s.storedFields(t, "keep"); f["API_KEY"] != "k1" || f["BEHAVIOUR"] != "pass" {
				t.Errorf("stored fields changed: %v", f)
			}
			// A new instance that fails is not created at all.
			if _, err := s.put("checker", "never", "apiKey", base("fail", "k2")); code(err) != "verification_failed" {
				t.Fatalf("err = %v", err)
			}
			if _, err := s.svc.Instance(context.Background(), "acme", "never"); code(err) != "instance_not_found" {
				t.Errorf("failed install left an instance: %v", err)
			}
		})

		t.Run("times out", func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids")
			f := base("hang", "k1")
			f["PID_FILE"] = pidFile
			start := time.Now()
			_, err := s.put("checker", "slow", "apiKey", f)
			if code(err) != "verification_failed" || !strings.Contains(err.Error(), "did not finish") {
				t.Fatalf("err = %v", err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("timeout of 3 s took %s", d)
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("the command wrote no pids: %v", err)
			}
			pids := strings.Fields(string(b))
			if len(pids) != 2 {
				t.Fatalf("pids = %q", b)
			}
			for _, p := range pids {
				pid, _ := strconv.Atoi(p)
				if !gone(pid, 3*time.Second) {
					t.Errorf("process %d outlived its verification", pid)
				}
			}
			if _, err := s.svc.Instance(context.Background(), "acme", "slow"); code(err) != "instance_not_found" {
				t.Errorf("timed-out install left an instance: %v", err)
			}
		})

		t.Run("garbage output: the exit code decides", func(t *testing.T) {
			v, err := s.put("checker", "garbage", "apiKey", base("garbage-ok", "k1"))
			if err != nil || v.AuthState != tenants.AuthReady || !strings.Contains(v.Verification.Message, "status 0") {
				t.Fatalf("exit 0: %v %+v", err, v)
			}
			_, err = s.put("checker", "garbage2", "apiKey", base("garbage-fail", "k1"))
			if code(err) != "verification_failed" || !strings.Contains(err.Error(), "status 3") {
				t.Fatalf("exit 3: %v", err)
			}
		})

		t.Run("environment", func(t *testing.T) {
			v, err := s.put("checker", "env", "apiKey", base("env", "k1"))
			if err != nil {
				t.Fatal(err)
			}
			// The declared variables with a value or default, PATH, and
			// what sh sets itself (PWD, SHLVL, OLDPWD, _).
			got := map[string]bool{}
			for _, n := range strings.Fields(v.Verification.Message) {
				got[n] = true
			}
			for _, want := range []string{"API_KEY", "API_URL", "BEHAVIOUR", "REGION", "PATH"} {
				if !got[want] {
					t.Errorf("environment lacks %s: %s", want, v.Verification.Message)
				}
			}
			for n := range got {
				switch n {
				case "API_KEY", "API_URL", "BEHAVIOUR", "REGION", "PATH", "PWD", "SHLVL", "OLDPWD", "_":
				default:
					t.Errorf("environment has undeclared %s", n)
				}
			}
			if got["PID_FILE"] || got["HOME"] {
				t.Errorf("environment = %s", v.Verification.Message)
			}
			pwd, _ := v.Verification.Details["pwd"].(string)
			if !strings.Contains(pwd, "verify-checker-") {
				t.Errorf("ran in %q, want a private copy of the connector", pwd)
			}
			if _, err := os.Stat(pwd); !os.IsNotExist(err) {
				t.Errorf("the private copy %s was not removed: %v", pwd, err)
			}
		})

		t.Run("echoed secret is redacted everywhere", func(t *testing.T) {
			const canary = "canary-verify-6d02f1-SECRET"
			v, err := s.put("checker", "echo", "apiKey", base("echo-pass", canary))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(v)
			if strings.Contains(string(b), canary) || !strings.Contains(v.Verification.Message, secrets.Redacted) {
				t.Errorf("response = %s", b)
			}
			for _, instance := range []string{"echo2", "echo3"} {
				behaviour := map[string]string{"echo2": "echo-fail", "echo3": "echo-exit"}[instance]
				_, err = s.put("checker", instance, "apiKey", base(behaviour, canary))
				if code(err) != "verification_failed" || strings.Contains(err.Error(), canary) {
					t.Errorf("%s: err = %v", behaviour, err)
				}
				if d := switchboard.CodeOf(err); d != "verification_failed" {
					t.Errorf("code = %s", d)
				}
			}
			got, _ := s.svc.Instance(context.Background(), "acme", "echo")
			b, _ = json.Marshal(got)
			if strings.Contains(string(b), canary) {
				t.Errorf("stored view = %s", b)
			}
			if rows := dumpInstances(t, db); strings.Contains(rows, canary) || !strings.Contains(rows, secrets.Redacted) {
				t.Errorf("instances table = %s", rows)
			}
			if strings.Contains(s.logs.String(), canary) {
				t.Errorf("logs hold the secret")
			}
		})

		t.Run("no verify: activated and says so", func(t *testing.T) {
			v, err := s.put("plain", "plain", "apiKey", map[string]string{"API_URL": "http://127.0.0.1:1"})
			if err != nil {
				t.Fatal(err)
			}
			if v.AuthState != tenants.AuthUnverified || v.Verification.Ran || !strings.Contains(v.Verification.Message, "not verified") {
				t.Errorf("view = %s %+v", v.AuthState, v.Verification)
			}
			b, _ := json.Marshal(v)
			if !strings.Contains(string(b), `"auth_state":"unverified"`) || !strings.Contains(string(b), `"ran":false`) {
				t.Errorf("JSON = %s", b)
			}
		})
	})
}

// code returns the machine code of err, or "" when err is nil.
func code(err error) string {
	if err == nil {
		return ""
	}
	return switchboard.CodeOf(err)
}

// gone reports whether pid ends (or is a zombie) within d.
func gone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		// The state follows the command name in parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestVerifyProbe(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		s := newStack(t, db, verifyCatalog(t), &clock{})
		s.tenant(t, "acme")
		var hits atomic.Int64
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			if r.Header.Get("X-Api-Key") != "good-key" {
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"message":"bad credentials"}`)
				return
			}
			io.WriteString(w, `{"user": "api-key"}`)
		}))
		t.Cleanup(up.Close)

		v, err := s.put("crm", "good", "apiKey", map[string]string{"API_URL": up.URL, "API_KEY": "good-key"})
		if err != nil {
			t.Fatalf("Install: %v", err)
		}
		if v.AuthState != tenants.AuthReady || v.Verification.Kind != "probe" || v.Verification.Details["status"] != 200.0 && v.Verification.Details["status"] != 200 {
			t.Errorf("view = %s %+v", v.AuthState, v.Verification)
		}
		before := hits.Load()

		_, err = s.put("crm", "good", "apiKey", map[string]string{"API_KEY": "bad-key-canary"})
		if code(err) != "verification_failed" || strings.Contains(err.Error(), "bad-key-canary") {
			t.Fatalf("bad key: %v", err)
		}
		if hits.Load() != before+1 {
			t.Errorf("the probe did not reach the upstream with the candidate key")
		}
		if f := s.storedFields(t, "good"); f["API_KEY"] != "good-key" {
			t.Errorf("stored key changed: %v", f)
		}

		// Per-user modes cannot be verified before a user connects.
		v, err = s.put("crm", "peruser", "oauth", map[string]string{"API_URL": up.URL})
		if err != nil {
			t.Fatalf("Install oauth: %v", err)
		}
		if v.AuthState != tenants.AuthUnverified || !strings.Contains(v.Verification.Message, "needs a connected user") {
			t.Errorf("oauth view = %s %+v", v.AuthState, v.Verification)
		}
	})
}
