package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/secrets"
)

var tokenLine = regexp.MustCompile(`(?m)^\s+(` + auth.OperatorTokenPrefix + `\S+)$`)

func openDataDir(t *testing.T, dir string) *database.DB {
	t.Helper()
	db, err := database.OpenSQLite(context.Background(), filepath.Join(dir, database.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A first start that fails to bind stores no operator token (nobody would
// ever see it); the next start that binds generates one, prints it on the
// terminal only, and it works. The log never says the admin token is
// "unset" as if none existed.
func TestFirstStartPrintsTheTokenOnlyOnceBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"serve", "--addr", taken.Addr().String(), "--data-dir", dir}, envMap(nil), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "listening") {
		t.Fatalf("serve on a taken port: %v", err)
	}
	if n := dbtest.Count(t, openDataDir(t, dir), "operator_tokens", ""); n != 0 || strings.Contains(errOut.String(), auth.OperatorTokenPrefix) {
		t.Fatalf("a start that never listened stored %d operator tokens", n)
	}

	addr := freeAddr(t)
	logs, terminal := &logtest.Buffer{}, &logtest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--data-dir", dir}, envMap(nil), logs, terminal)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	var token string
	for deadline := time.Now().Add(20 * time.Second); token == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := tokenLine.FindStringSubmatch(terminal.String()); m != nil {
			token = m[1]
		}
	}
	if token == "" {
		t.Fatalf("no operator token printed:\n%s\n%s", terminal.String(), logs.String())
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/tenants", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the printed token answers %d", res.StatusCode)
	}
	if strings.Contains(logs.String(), token) {
		t.Fatal("the operator token reached the JSON log")
	}
	if strings.Contains(logs.String(), `"admin_token":"unset"`) || !strings.Contains(logs.String(), "generated the first operator token") {
		t.Fatalf("the log does not say a token was generated:\n%s", logs.String())
	}
}

// switchboard admin token create|list|revoke work on the store with no
// server running: the recovery path.
func TestAdminTokenCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := envMap(map[string]string{"SWITCHBOARD_DATA_DIR": dir})
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"admin", "token"}, args...), env, &out, io.Discard)
		return out.String(), err
	}
	if _, err := cli("create"); err == nil {
		t.Fatal("create without --name succeeded")
	}
	out, err := cli("create", "--name", "break glass")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out)
	db := openDataDir(t, dir)
	if !auth.NewOperators(db).Verify(context.Background(), token) {
		t.Fatalf("the created token %q does not verify", token)
	}
	list, err := cli("list")
	if err != nil || !strings.Contains(list, "break glass") || strings.Contains(list, token) {
		t.Fatalf("list = %q, %v", list, err)
	}
	id := strings.Fields(strings.Split(list, "\n")[1])[0]
	if _, err := cli("revoke", id); err != nil {
		t.Fatal(err)
	}
	if auth.NewOperators(db).Verify(context.Background(), token) {
		t.Fatal("a revoked token still verifies")
	}
	if _, err := cli("revoke", "opt_nope"); err == nil {
		t.Fatal("revoking an unknown id succeeded")
	}
}

// keys check reports rows under a previous key and fails; keys rotate
// re-seals them; keys check then passes and the values read back.
func TestKeysRotateAndCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	b64 := base64.StdEncoding.EncodeToString
	ctx := context.Background()
	oldRing, _ := secrets.NewKeyring(oldKey)
	cfg, err := parseConfig("migrate", []string{"--data-dir", dir}, envMap(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openStore(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ref := secrets.Ref{Tenant: "t1", Owner: "instance:a", Name: "API_KEY"}
	if err := secrets.NewStore(db, oldRing).Put(ctx, ref, secrets.New("canary-rotate-value")); err != nil {
		t.Fatal(err)
	}
	env := envMap(map[string]string{"SWITCHBOARD_DATA_DIR": dir, "SWITCHBOARD_MASTER_KEY": b64(newKey), "SWITCHBOARD_PREVIOUS_MASTER_KEYS": b64(oldKey)})
	keys := func(sub string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, []string{"keys", sub}, env, &out, io.Discard)
		return out.String(), err
	}
	out, err := keys("check")
	if !errors.Is(err, errKeysBehind) || !strings.Contains(out, "1 rows (previous key)") {
		t.Fatalf("check before rotation = %v:\n%s", err, out)
	}
	if out, err = keys("rotate"); err != nil || !strings.Contains(out, "re-sealed 1 rows") {
		t.Fatalf("rotate = %v:\n%s", err, out)
	}
	if out, err = keys("check"); err != nil {
		t.Fatalf("check after rotation = %v:\n%s", err, out)
	}
	if strings.Contains(out, "canary-rotate-value") {
		t.Fatal("keys output shows a secret value")
	}
	newRing, _ := secrets.NewKeyring(newKey)
	if v, err := secrets.NewStore(db, newRing).Get(ctx, ref); err != nil || v.Reveal() != "canary-rotate-value" {
		t.Fatalf("the value under the new key alone: %v", err)
	}
}

// Serving an un-migrated Postgres database stops with the command that
// fixes it, not a raw SQL error.
func TestServeRefusesUnmigratedPostgres(t *testing.T) {
	t.Parallel()
	dsn := dbtest.PostgresURL(t)
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()},
		envMap(map[string]string{"SWITCHBOARD_DATABASE_URL": dsn}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `run "switchboard migrate"`) || strings.Contains(err.Error(), "relation") {
		t.Fatalf("serve on an un-migrated database: %v", err)
	}
}
