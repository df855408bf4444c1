package secrets_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/secrets"
)

const canary = "canary-7f3a9c-SECRET-VALUE"

func TestSecretRedactsEverywhere(t *testing.T) {
	t.Parallel()
	s := secrets.New(canary)
	type inner struct{ hidden secrets.Secret }
	type wrapper struct {
		Token secrets.Secret `json:"token"`
		Ptr   *secrets.Secret
		in    inner
		un    secrets.Secret
	}
	w := wrapper{Token: s, Ptr: &s, in: inner{hidden: s}, un: s}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "secret", s, "wrapped", w)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "secret", s)
	js, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%s": fmt.Sprintf("%s", s), "%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", w),
		"%#v": fmt.Sprintf("%#v", w), "%q": fmt.Sprintf("%q", s), "%x": fmt.Sprintf("%x", s),
		"%d": fmt.Sprintf("%d", s), "Sprint": fmt.Sprint(s, w), "json": string(js), "slog": logs.String(),
		"error": fmt.Errorf("wrapping %v", s).Error(),
	}
	for name, out := range outputs {
		if strings.Contains(out, canary) {
			t.Errorf("%s leaked the secret: %s", name, out)
		}
		if !strings.Contains(out, secrets.Redacted) {
			t.Errorf("%s = %q, want it to say %s", name, out, secrets.Redacted)
		}
	}
	if s.Reveal() != canary {
		t.Fatal("Reveal lost the value")
	}
	var back secrets.Secret
	if err := json.Unmarshal([]byte(`"v"`), &back); err != nil || back.Reveal() != "v" {
		t.Fatalf("UnmarshalJSON = %v, %v", back.Reveal(), err)
	}
	if err := json.Unmarshal([]byte(`{"a":1}`), &back); err == nil {
		t.Fatal("UnmarshalJSON of an object succeeded")
	}
}

func newKey(t *testing.T) []byte {
	k := make([]byte, secrets.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestCiphertextIsBoundToItsRow(t *testing.T) {
	t.Parallel()
	kr, err := secrets.NewKeyring(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := secrets.Ref{Tenant: "t1", Owner: "instance:a", Name: "API_KEY"}
	id, ct, err := kr.Seal(ref, []byte(canary))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, []byte(canary)) {
		t.Fatal("ciphertext contains the plaintext")
	}
	if pt, err := kr.Open(ref, id, ct); err != nil || string(pt) != canary {
		t.Fatalf("Open = %q, %v", pt, err)
	}
	others := []secrets.Ref{
		{Tenant: "t2", Owner: ref.Owner, Name: ref.Name},
		{Tenant: ref.Tenant, Owner: "instance:b", Name: ref.Name},
		{Tenant: ref.Tenant, Owner: ref.Owner, Name: "OTHER"},
	}
	for _, o := range others {
		if _, err := kr.Open(o, id, ct); !errors.Is(err, secrets.ErrUndecryptable) {
			t.Errorf("Open under %+v = %v, want ErrUndecryptable", o, err)
		}
	}
	other, _ := secrets.NewKeyring(newKey(t))
	if _, err := other.Open(ref, id, ct); !errors.Is(err, secrets.ErrUndecryptable) {
		t.Errorf("Open with a keyring without the key = %v", err)
	}
}

func TestStoreContract(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		kr, _ := secrets.NewKeyring(newKey(t))
		st := secrets.NewStore(db, kr)
		a := secrets.Ref{Tenant: "t1", Owner: "instance:a", Name: "API_KEY"}
		b := secrets.Ref{Tenant: "t1", Owner: "instance:a", Name: "BASE_URL"}
		if _, err := st.Get(ctx, a); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("Get missing = %v, want ErrNotFound", err)
		}
		for _, r := range []secrets.Ref{a, b} {
			if err := st.Put(ctx, r, secrets.New(canary+r.Name)); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Put(ctx, a, secrets.New(canary)); err != nil { // replace
			t.Fatal(err)
		}
		got, err := st.Get(ctx, a)
		if err != nil || got.Reveal() != canary {
			t.Fatalf("Get = %v, %v", got.Reveal(), err)
		}
		all, err := st.GetAll(ctx, "t1", "instance:a")
		if err != nil || len(all) != 2 || all["BASE_URL"].Reveal() != canary+"BASE_URL" {
			t.Fatalf("GetAll = %v, %v", all, err)
		}
		metas, err := st.List(ctx, "t1", "instance:a")
		if err != nil || len(metas) != 2 || metas[0].Name != "API_KEY" || metas[0].KeyID != kr.PrimaryID() || metas[0].UpdatedAt.IsZero() {
			t.Fatalf("List = %+v, %v", metas, err)
		}
		// No row of the table holds the value in clear.
		if n := dbtest.Count(t, db, "secrets", "ciphertext = $1", []byte(canary)); n != 0 {
			t.Fatal("plaintext stored")
		}
		// A ciphertext copied into another row does not decrypt there.
		_, err = db.ExecContext(ctx, `INSERT INTO secrets (tenant_id, owner, name, key_id, ciphertext, updated_at)
			SELECT 't2', owner, name, key_id, ciphertext, updated_at FROM secrets WHERE tenant_id = 't1' AND name = 'API_KEY'`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Get(ctx, secrets.Ref{Tenant: "t2", Owner: a.Owner, Name: a.Name}); !errors.Is(err, secrets.ErrUndecryptable) {
			t.Fatalf("copied ciphertext: Get = %v, want ErrUndecryptable", err)
		}
		if err := st.DeleteOwner(ctx, "t1", "instance:a"); err != nil {
			t.Fatal(err)
		}
		if n := dbtest.Count(t, db, "secrets", "tenant_id = 't1'"); n != 0 {
			t.Fatalf("rows after DeleteOwner = %d", n)
		}
	})
}

// TestStoreTxVariantsJoinTheCallersTransaction: the ...Tx methods write
// inside another store's transaction: rolled back with it, committed with
// it, and visible to that transaction before the commit.
func TestStoreTxVariantsJoinTheCallersTransaction(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		kr, _ := secrets.NewKeyring(newKey(t))
		st := secrets.NewStore(db, kr)
		a := secrets.Ref{Tenant: "t1", Owner: "instance:a", Name: "API_KEY"}
		b := secrets.Ref{Tenant: "t1", Owner: "instance:a", Name: "BASE_URL"}
		if err := st.Put(ctx, b, secrets.New("kept")); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err := db.InTx(ctx, func(tx *sql.Tx) error {
			if err := st.PutTx(ctx, tx, a, secrets.New(canary)); err != nil {
				return err
			}
			if err := st.DeleteTx(ctx, tx, b); err != nil {
				return err
			}
			metas, err := st.ListTx(ctx, tx, "t1", "instance:a")
			if err != nil || len(metas) != 1 || metas[0].Name != "API_KEY" {
				t.Errorf("ListTx inside the transaction = %+v, %v", metas, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("InTx = %v", err)
		}
		if n := dbtest.Count(t, db, "secrets", "tenant_id = 't1'"); n != 1 {
			t.Fatalf("rows after a rolled-back transaction = %d, want the 1 from before", n)
		}
		if err := db.InTx(ctx, func(tx *sql.Tx) error {
			if err := st.PutTx(ctx, tx, a, secrets.New(canary)); err != nil {
				return err
			}
			return st.DeleteOwnerTx(ctx, tx, "t1", "instance:b")
		}); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Get(ctx, a); err != nil || got.Reveal() != canary {
			t.Fatalf("Get after the commit = %v", err)
		}
	})
}

func TestRotateResealsUnderTheNewKey(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		oldKey, newK := newKey(t), newKey(t)
		oldRing, _ := secrets.NewKeyring(oldKey)
		ref := secrets.Ref{Tenant: "t1", Owner: "instance:a", Name: "API_KEY"}
		if err := secrets.NewStore(db, oldRing).Put(ctx, ref, secrets.New(canary)); err != nil {
			t.Fatal(err)
		}
		ring, _ := secrets.NewKeyring(newK, oldKey)
		st := secrets.NewStore(db, ring)
		if v, err := st.Get(ctx, ref); err != nil || v.Reveal() != canary { // old key still opens
			t.Fatalf("Get before rotation = %v", err)
		}
		n, err := st.Rotate(ctx)
		if err != nil || n != 1 {
			t.Fatalf("Rotate = %d, %v; want 1", n, err)
		}
		onlyNew, _ := secrets.NewKeyring(newK)
		if v, err := secrets.NewStore(db, onlyNew).Get(ctx, ref); err != nil || v.Reveal() != canary {
			t.Fatalf("Get with only the new key = %v", err)
		}
	})
}

func TestLoadKeyring(t *testing.T) {
	t.Parallel()
	good := base64.StdEncoding.EncodeToString(newKey(t))
	dir := t.TempDir()
	t.Run("env", func(t *testing.T) {
		_, src, err := secrets.LoadKeyring(secrets.KeyOptions{Env: good})
		if err != nil || src != secrets.KeyFromEnv {
			t.Fatalf("= %v, %v", src, err)
		}
	})
	for name, bad := range map[string]string{"short": base64.StdEncoding.EncodeToString([]byte("short-key")), "not base64": "@@@" + canary} {
		t.Run("malformed "+name, func(t *testing.T) {
			_, _, err := secrets.LoadKeyring(secrets.KeyOptions{Env: bad, File: filepath.Join(dir, "unused"), Create: true})
			if err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_MASTER_KEY is malformed") {
				t.Fatalf("err = %v", err)
			}
			if strings.Contains(err.Error(), canary) {
				t.Fatal("error echoes the key")
			}
		})
	}
	t.Run("no key without create", func(t *testing.T) {
		_, _, err := secrets.LoadKeyring(secrets.KeyOptions{File: filepath.Join(dir, "missing.key")})
		if err == nil {
			t.Fatal("missing key file accepted")
		}
	})
	t.Run("create then reuse", func(t *testing.T) {
		path := filepath.Join(dir, "sub", "master.key")
		k1, src, err := secrets.LoadKeyring(secrets.KeyOptions{File: path, Create: true})
		if err != nil || src != secrets.KeyFileCreated {
			t.Fatalf("create = %v, %v", src, err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode(), err)
		}
		k2, src, err := secrets.LoadKeyring(secrets.KeyOptions{File: path, Create: true})
		if err != nil || src != secrets.KeyFromFile || k1.PrimaryID() != k2.PrimaryID() {
			t.Fatalf("reuse = %v, %v, same key %v", src, err, k1.PrimaryID() == k2.PrimaryID())
		}
	})
}
