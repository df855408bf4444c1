package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/registry"
)

// catalogUsage documents the catalog subcommands of "switchboard connector".
const catalogUsage = `catalog subcommands:
  index CATALOG_DIR
            create or update CATALOG_DIR/connectors.json from the connector
            folders in it (every summary field from each manifest), then hash
  hash CATALOG_DIR
            rewrite the sha256 and size of every file in CATALOG_DIR/connectors.json
  verify [--keys KEYS] CATALOG_DIR
            check every file against the index, lint every manifest and, with
            --keys (base64 ed25519 public keys, comma-separated), the signature;
            exits non-zero with the reasons
  sign --key FILE CATALOG_DIR
            write CATALOG_DIR/connectors.json.sig with the private key in FILE
  keygen --out FILE
            write a new private key to FILE (0600) and its public key to FILE.pub,
            and print the public key (the value of --catalog-keys)
`

// errVerifyFailed reports that connector verify found problems; they have
// been printed already.
var errVerifyFailed = errors.New("the catalog has problems")

// runCatalogCommand runs the catalog subcommands; ok is false for a
// subcommand it does not know.
func runCatalogCommand(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) (ok bool, err error) {
	switch sub {
	case "index":
		return true, catalogIndex(ctx, args, stdout, stderr)
	case "hash":
		return true, catalogHash(ctx, args, stdout, stderr)
	case "verify":
		return true, catalogVerify(ctx, args, stdout, stderr)
	case "sign":
		return true, catalogSign(ctx, args, stdout, stderr)
	case "keygen":
		return true, catalogKeygen(ctx, args, stdout, stderr)
	}
	return false, nil
}

// catalogDirArg parses a flag set that takes one catalog directory.
func catalogDirArg(fs *flag.FlagSet, args []string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return "", fmt.Errorf("%s: give one catalog directory", fs.Name())
	}
	dir := fs.Arg(0)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s: %s is not a directory", fs.Name(), dir)
	}
	return dir, nil
}

func catalogHash(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connector hash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir, err := catalogDirArg(fs, args)
	if err != nil {
		return err
	}
	indexPath := filepath.Join(dir, registry.IndexName)
	before, err := os.ReadFile(indexPath)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("connector hash: %s does not exist; \"switchboard connector index %s\" creates it", indexPath, dir)
	}
	if err := registry.HashCatalog(dir); err != nil {
		return fmt.Errorf("connector hash: %w", err)
	}
	return reportIndex(dir, before, stdout, stderr)
}

// catalogIndex creates or updates the index from the connector folders.
func catalogIndex(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connector index", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir, err := catalogDirArg(fs, args)
	if err != nil {
		return err
	}
	before, _ := os.ReadFile(filepath.Join(dir, registry.IndexName))
	changes, err := registry.IndexCatalog(dir)
	if err != nil {
		return fmt.Errorf("connector index: %w", err)
	}
	for _, id := range changes.Added {
		fmt.Fprintf(stdout, "added %s\n", id)
	}
	for _, id := range changes.Removed {
		fmt.Fprintf(stdout, "removed %s (its folder has no %s)\n", id, registry.ManifestFile)
	}
	return reportIndex(dir, before, stdout, stderr)
}

// reportIndex says whether the index changed from before, and that a
// signature no longer matches when it did.
func reportIndex(dir string, before []byte, stdout, stderr io.Writer) error {
	indexPath := filepath.Join(dir, registry.IndexName)
	after, _ := os.ReadFile(indexPath)
	if bytes.Equal(before, after) {
		fmt.Fprintf(stdout, "%s is up to date\n", indexPath)
		return nil
	}
	fmt.Fprintf(stdout, "rewrote %s\n", indexPath)
	if _, err := os.Stat(filepath.Join(dir, registry.SignatureName)); err == nil {
		fmt.Fprintf(stderr, "note: %s no longer matches the index; run \"switchboard connector sign\" again\n", registry.SignatureName)
	}
	return nil
}

func catalogVerify(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connector verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keysFlag := fs.String("keys", "", "trusted ed25519 public keys (base64, comma-separated); when set the signature is required")
	dir, err := catalogDirArg(fs, args)
	if err != nil {
		return err
	}
	keys, err := registry.ParsePublicKeys(*keysFlag)
	if err != nil {
		return fmt.Errorf("connector verify: --keys: %w", err)
	}
	problems := 0
	cat, err := registry.LoadCatalogWith(os.DirFS(dir), openapi.Compile, registry.LoadOptions{Keys: keys})
	if err != nil {
		fmt.Fprintf(stdout, "error: %v\n", err)
		fmt.Fprintln(stderr, "1 problem")
		return errVerifyFailed
	}
	if len(keys) > 0 {
		fmt.Fprintf(stdout, "signature: verified\n")
	} else if _, err := os.Stat(filepath.Join(dir, registry.SignatureName)); err == nil {
		fmt.Fprintf(stdout, "signature: present, not checked (give --keys)\n")
	}
	for _, p := range cat.Problems() {
		fmt.Fprintf(stdout, "error: %v\n", p)
		problems++
	}
	idx, err := registry.ReadIndex(os.DirFS(dir))
	if err != nil {
		return fmt.Errorf("connector verify: %w", err)
	}
	for _, e := range idx.Connectors {
		files := make([]string, len(e.Files))
		for i, f := range e.Files {
			files[i] = f.Path
		}
		raw, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.Folder), registry.ManifestFile))
		if err != nil {
			continue // the load reported it
		}
		for _, f := range registry.LintManifest(raw, e.Folder, files) {
			line := f
			line.File = e.Folder + "/" + f.File
			fmt.Fprintln(stdout, line.String())
			if f.Severity == registry.SeverityError {
				problems++
			}
		}
	}
	fmt.Fprintf(stdout, "%d connectors loaded, %d problems\n", len(cat.List()), problems)
	if problems > 0 {
		fmt.Fprintf(stderr, "%d problems\n", problems)
		return errVerifyFailed
	}
	return nil
}

func catalogSign(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connector sign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyFile := fs.String("key", "", "the private key file (from connector keygen)")
	dir, err := catalogDirArg(fs, args)
	if err != nil {
		return err
	}
	if *keyFile == "" {
		fs.Usage()
		return errors.New("connector sign: --key is required")
	}
	kb, err := os.ReadFile(*keyFile)
	if err != nil {
		return fmt.Errorf("connector sign: %w", err)
	}
	key, err := registry.ParsePrivateKey(kb)
	if err != nil {
		return fmt.Errorf("connector sign: %s: %w", *keyFile, err)
	}
	index, err := os.ReadFile(filepath.Join(dir, registry.IndexName))
	if err != nil {
		return fmt.Errorf("connector sign: %w", err)
	}
	if _, err := registry.ReadIndex(os.DirFS(dir)); err != nil {
		return fmt.Errorf("connector sign: %w", err)
	}
	sigPath := filepath.Join(dir, registry.SignatureName)
	if err := os.WriteFile(sigPath, registry.SignIndex(index, key), 0o644); err != nil {
		return fmt.Errorf("connector sign: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s (public key %s)\n", sigPath, registry.EncodePublicKey(key.Public().(ed25519.PublicKey)))
	return nil
}

func catalogKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connector keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "the private key file to create")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("connector keygen: --out is required")
	}
	pub, priv, err := registry.GenerateKey()
	if err != nil {
		return fmt.Errorf("connector keygen: %w", err)
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("connector keygen: %w", err)
	}
	if _, err := f.Write(registry.EncodePrivateKey(priv)); err != nil {
		f.Close()
		return fmt.Errorf("connector keygen: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("connector keygen: %w", err)
	}
	enc := registry.EncodePublicKey(pub)
	if err := os.WriteFile(*out+".pub", []byte(enc+"\n"), 0o644); err != nil {
		return fmt.Errorf("connector keygen: %w", err)
	}
	fmt.Fprintf(stderr, "wrote %s (private, keep it secret) and %s\n", *out, *out+".pub")
	fmt.Fprintln(stdout, enc)
	return nil
}
