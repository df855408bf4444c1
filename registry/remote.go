package registry

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	switchboard "github.com/switchboardhq/switchboard"
)

// Bounds of a remote catalog download.
const (
	maxIndexBytes     = 16 << 20
	maxSignatureBytes = 4 << 10
	maxFileBytes      = 64 << 20
	maxCatalogBytes   = 512 << 20
)

// currentName is the file, in a remote catalog's cache directory, naming
// the subdirectory that holds the last good download.
const currentName = "current"

// Remote is a catalog published at an HTTPS URL, cached on disk. The URL
// is the catalog root (the index is URL/connectors.json, a connector's
// file URL/<folder>/<path>); a URL ending in /connectors.json names the
// index itself. Every download is verified as a catalog directory is (the
// signature when Keys are set, every file's size and sha256) before it
// replaces the cached copy.
type Remote struct {
	// URL is the https:// URL of the catalog root or of its index.
	URL string
	// CacheDir holds the downloaded catalog; it is created if needed.
	CacheDir string
	// Client fetches the catalog; nil uses a client with a 60 s timeout.
	// Redirects are followed only to https URLs.
	Client *http.Client
	// Keys, when set, require a valid index signature.
	Keys []ed25519.PublicKey
	// Compile compiles the connectors' descriptions.
	Compile Compiler
	// Compiled, when set, is passed to LoadCatalogWith (LoadOptions).
	Compiled *Compiled
	// RefuseLintErrors is passed to LoadCatalogWith (LoadOptions).
	RefuseLintErrors bool
}

// Load returns the remote catalog: freshly downloaded, or, when the
// download fails, the last good copy in the cache (re-verified). It fails
// when neither is available; the error says why the download failed.
func (r *Remote) Load(ctx context.Context) (*Catalog, error) {
	cat, _, err := r.fetch(ctx)
	if err == nil {
		return cat, nil
	}
	cached, cerr := r.loadCached()
	if cerr != nil {
		return nil, fmt.Errorf("downloading the catalog: %w (and no usable cached copy: %v)", err, cerr)
	}
	return cached, nil
}

// Refresh downloads the catalog again and, when it verified and loaded,
// makes it cat's content; it reports whether anything changed. A refresh
// that fails leaves cat and the cache as they were.
func (r *Remote) Refresh(ctx context.Context, cat *Catalog) (bool, error) {
	next, changed, err := r.fetch(ctx)
	if err != nil || !changed {
		return false, err
	}
	cat.replace(next)
	return true, nil
}

// Run refreshes cat every interval until ctx is done, logging each change
// and each failure (the last good catalog stays in use).
func (r *Remote) Run(ctx context.Context, cat *Catalog, every time.Duration, logger *slog.Logger) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := r.Refresh(ctx, cat)
		switch {
		case err != nil:
			logger.Warn("catalog refresh failed; keeping the last good catalog", "reason", err.Error())
		case changed:
			logger.Info("catalog refreshed", "connectors", len(cat.List()), "refused", len(cat.Problems()))
			for _, p := range cat.Problems() {
				logger.Warn("connector refused", "reason", p.Error())
			}
		}
	}
}

// base returns the catalog root URL, ending in a slash.
func (r *Remote) base() (*url.URL, error) {
	u, err := url.Parse(r.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, switchboard.E(switchboard.ErrInvalid, "catalog_url", "the catalog URL must be an https:// URL")
	}
	u.Path = strings.TrimSuffix(u.Path, IndexName)
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	return u, nil
}

func (r *Remote) client() *http.Client {
	if r.Client != nil {
		c := *r.Client
		c.CheckRedirect = httpsOnly
		return &c
	}
	return &http.Client{Timeout: 60 * time.Second, CheckRedirect: httpsOnly}
}

func httpsOnly(req *http.Request, via []*http.Request) error {
	if req.URL.Scheme != "https" {
		return errors.New("redirect to a non-https URL refused")
	}
	if len(via) >= 5 {
		return errors.New("too many redirects")
	}
	return nil
}

// current returns the cached catalog's directory, or "".
func (r *Remote) current() string {
	b, err := os.ReadFile(filepath.Join(r.CacheDir, currentName))
	if err != nil {
		return ""
	}
	name := strings.TrimSpace(string(b))
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return ""
	}
	return filepath.Join(r.CacheDir, name)
}

// loadCached loads the last good download.
func (r *Remote) loadCached() (*Catalog, error) {
	dir := r.current()
	if dir == "" {
		return nil, errors.New("no cached catalog")
	}
	return LoadCatalogWith(os.DirFS(dir), r.Compile, LoadOptions{Keys: r.Keys, Compiled: r.Compiled, RefuseLintErrors: r.RefuseLintErrors})
}

// fetch downloads the index (and signature), verifies the signature, and,
// unless the cache already holds that exact index, downloads every listed
// file into a new cache directory, loads it and makes it current.
func (r *Remote) fetch(ctx context.Context) (*Catalog, bool, error) {
	if r.Compile == nil {
		return nil, false, errors.New("remote catalog: no compiler")
	}
	base, err := r.base()
	if err != nil {
		return nil, false, err
	}
	client := r.client()
	index, err := get(ctx, client, base.JoinPath(IndexName).String(), maxIndexBytes)
	if err != nil {
		return nil, false, fmt.Errorf("fetching %s: %w", IndexName, err)
	}
	sig, err := get(ctx, client, base.JoinPath(SignatureName).String(), maxSignatureBytes)
	if err != nil && !errors.Is(err, errNotFound) {
		return nil, false, fmt.Errorf("fetching %s: %w", SignatureName, err)
	}
	if len(r.Keys) > 0 {
		if sig == nil {
			return nil, false, switchboard.E(switchboard.ErrInvalid, "catalog_unsigned",
				"catalog index %s has no signature %s, and catalog keys are configured", IndexName, SignatureName)
		}
		if err := VerifyIndex(index, sig, r.Keys); err != nil {
			return nil, false, err
		}
	}
	idx, err := parseIndex(index)
	if err != nil {
		return nil, false, err
	}

	h := sha256.New()
	h.Write(index)
	h.Write([]byte{0})
	h.Write(sig)
	name := "c-" + hex.EncodeToString(h.Sum(nil))[:24]
	prev := r.current()
	if prev != "" && filepath.Base(prev) == name {
		return nil, false, nil
	}

	if err := os.MkdirAll(r.CacheDir, 0o755); err != nil {
		return nil, false, fmt.Errorf("catalog cache: %w", err)
	}
	stage, err := os.MkdirTemp(r.CacheDir, ".stage-")
	if err != nil {
		return nil, false, fmt.Errorf("catalog cache: %w", err)
	}
	defer os.RemoveAll(stage)
	if err := os.WriteFile(filepath.Join(stage, IndexName), index, 0o644); err != nil {
		return nil, false, fmt.Errorf("catalog cache: %w", err)
	}
	if sig != nil {
		if err := os.WriteFile(filepath.Join(stage, SignatureName), sig, 0o644); err != nil {
			return nil, false, fmt.Errorf("catalog cache: %w", err)
		}
	}
	var total int64
	for _, e := range idx.Connectors {
		if !cleanRelPath(e.Folder) || strings.Contains(e.Folder, "/") {
			continue // refused by the load, with the reason
		}
		for _, f := range e.Files {
			if !cleanRelPath(f.Path) || f.Size < 0 || f.Size > maxFileBytes {
				continue
			}
			if total += f.Size; total > maxCatalogBytes {
				return nil, false, fmt.Errorf("the catalog is larger than %d bytes", maxCatalogBytes)
			}
			if err := r.stageFile(ctx, client, base, prev, stage, e.Folder, f); err != nil {
				return nil, false, err
			}
		}
	}
	cat, err := LoadCatalogWith(os.DirFS(stage), r.Compile, LoadOptions{Keys: r.Keys, Compiled: r.Compiled, RefuseLintErrors: r.RefuseLintErrors})
	if err != nil {
		return nil, false, err
	}
	final := filepath.Join(r.CacheDir, name)
	os.RemoveAll(final)
	if err := os.Rename(stage, final); err != nil {
		return nil, false, fmt.Errorf("catalog cache: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(r.CacheDir, currentName), []byte(name+"\n")); err != nil {
		return nil, false, fmt.Errorf("catalog cache: %w", err)
	}
	if prev != "" && prev != final {
		os.RemoveAll(prev)
	}
	return cat, true, nil
}

// stageFile puts one listed file into the staging directory: copied from
// the previous download when its hash matches, else downloaded. A file the
// server does not have or that does not match is left out (the load then
// refuses its connector, naming the file); a transport failure fails the
// whole refresh.
func (r *Remote) stageFile(ctx context.Context, client *http.Client, base *url.URL, prev, stage, folder string, f IndexFile) error {
	rel := path.Join(folder, f.Path)
	dst := filepath.Join(stage, filepath.FromSlash(rel))
	var b []byte
	if prev != "" {
		if old, err := os.ReadFile(filepath.Join(prev, filepath.FromSlash(rel))); err == nil && matches(old, f) {
			b = old
		}
	}
	if b == nil {
		segs := strings.Split(rel, "/")
		got, err := get(ctx, client, base.JoinPath(segs...).String(), f.Size+1)
		switch {
		case errors.Is(err, errNotFound) || errors.Is(err, errTooLarge):
			return nil
		case err != nil:
			return fmt.Errorf("fetching %s: %w", rel, err)
		}
		b = got
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("catalog cache: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("catalog cache: %w", err)
	}
	return nil
}

func matches(b []byte, f IndexFile) bool {
	if int64(len(b)) != f.Size {
		return false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == f.SHA256
}

var (
	errNotFound = errors.New("not found")
	errTooLarge = errors.New("response too large")
)

// get fetches u, reading at most limit bytes: more is errTooLarge, a 404
// errNotFound, any other non-200 an error.
func get(ctx context.Context, client *http.Client, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, errNotFound
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// writeFileAtomic writes name through a temporary file and a rename.
func writeFileAtomic(name string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
