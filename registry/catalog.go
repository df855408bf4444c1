package registry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	switchboard "github.com/switchboardhq/switchboard"
)

// IndexName is the file name of the catalog index at the catalog root.
const IndexName = "connectors.json"

// IndexVersion is the only catalog index format version LoadCatalog reads.
const IndexVersion = 1

// manifestName is the file name of a connector's manifest in its folder.
const manifestName = "connector.json"

// Index is the catalog index (connectors.json): the single root of trust
// for the catalog. It names every connector, its summary and the sha256 and
// size of every file of its package.
type Index struct {
	Version    int          `json:"version"`
	Connectors []IndexEntry `json:"connectors"`
}

// IndexEntry is one connector in the catalog index.
type IndexEntry struct {
	ID          string      `json:"id"`
	Name        string      `json:"name"`
	Type        string      `json:"type"`
	Scope       string      `json:"scope"`
	IconSmall   string      `json:"icon_small,omitempty"`
	IconLarge   string      `json:"icon_large,omitempty"`
	Description string      `json:"user_description,omitempty"`
	Requires    []string    `json:"requires,omitempty"`
	Tags        []string    `json:"tags,omitempty"`
	Auth        AuthSummary `json:"auth"`
	// Folder is the connector's folder relative to the catalog root. It
	// equals ID.
	Folder string `json:"folder"`
	// Files lists every file of the package, relative to Folder. A file
	// not listed here is never read.
	Files []IndexFile `json:"files"`
}

// IndexFile is the integrity record of one file of a connector package.
type IndexFile struct {
	// Path is relative to the connector's folder, slash-separated.
	Path string `json:"path"`
	// SHA256 is the lower-case hex SHA-256 of the file's bytes.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// AuthSummary is the index's summary of how a connector authenticates.
type AuthSummary struct {
	Type     string   `json:"type"`
	Provider string   `json:"provider,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
}

// Compiler compiles a connector's OpenAPI description and optional entity
// mapping (nil when the connector has none) into a registry. The openapi
// package's Compile is the production Compiler.
type Compiler func(spec []byte, mapping []byte) (*Spec, error)

// Catalog is a loaded catalog: the connectors whose packages verified
// against the index, and the problems of those that did not. It is safe
// for concurrent use. Its content changes only when a refresh (see Remote)
// replaces it whole with a newer catalog that loaded; each method call sees
// one consistent version.
type Catalog struct {
	st atomic.Pointer[catalogState]
}

// catalogState is one immutable version of a catalog.
type catalogState struct {
	version    int
	signed     bool
	connectors map[string]*Connector
	list       []*Connector
	entries    []IndexEntry
	problems   []error
}

func (c *Catalog) state() *catalogState {
	if s := c.st.Load(); s != nil {
		return s
	}
	return &catalogState{}
}

// replace makes next's content the catalog's.
func (c *Catalog) replace(next *Catalog) {
	c.st.Store(next.state())
}

// Connector returns the loaded connector with the given id.
func (c *Catalog) Connector(id string) (*Connector, bool) {
	x, ok := c.state().connectors[id]
	return x, ok
}

// List returns the loaded connectors sorted by id.
func (c *Catalog) List() []*Connector {
	return slices.Clone(c.state().list)
}

// Problems returns one error for every connector the catalog refused, in
// index order. Each wraps switchboard.ErrInvalid and names the connector.
func (c *Catalog) Problems() []error {
	return slices.Clone(c.state().problems)
}

// Signed reports whether the index's signature was verified against a
// configured key.
func (c *Catalog) Signed() bool { return c.state().signed }

// Index returns the index entries of the connectors that loaded, sorted by
// id.
func (c *Catalog) Index() Index {
	st := c.state()
	entries := make([]IndexEntry, len(st.entries))
	for i, e := range st.entries {
		e.Requires = slices.Clone(e.Requires)
		e.Tags = slices.Clone(e.Tags)
		e.Auth.Scopes = slices.Clone(e.Auth.Scopes)
		e.Files = slices.Clone(e.Files)
		entries[i] = e
	}
	return Index{Version: st.version, Connectors: entries}
}

// Entry returns the index entry of the loaded connector with the given id.
func (c *Catalog) Entry(id string) (IndexEntry, bool) {
	st := c.state()
	i, ok := slices.BinarySearchFunc(st.entries, id, func(e IndexEntry, id string) int { return strings.Compare(e.ID, id) })
	if !ok {
		return IndexEntry{}, false
	}
	return st.entries[i], true
}

// LoadOptions are the options of LoadCatalogWith.
type LoadOptions struct {
	// Keys are the operator's trusted ed25519 public keys. When any is
	// set, the index must carry a signature (connectors.json.sig) by one
	// of them, or the whole catalog is refused.
	Keys []ed25519.PublicKey
	// Compiled, when set, keeps OpenAPI connectors' registries in their
	// compact runtime form and caches them (see Compiled); nil compiles
	// every description and keeps the compiler's registry whole.
	Compiled *Compiled
	// RefuseLintErrors refuses, naming its errors, a connector whose
	// manifest has lint errors (LintManifest): what `switchboard
	// connector lint` rejects is not served. serve sets it.
	RefuseLintErrors bool
}

// LoadCatalog reads the catalog rooted at fsys: the index connectors.json at
// its root, then, for every connector, the files the index lists, each
// checked against its recorded size and sha256 before use. A connector
// whose package fails any check (a missing or altered file, a bad path, a
// manifest that disagrees with the index, a description that does not
// compile) is refused and recorded in Problems; the others still load. A
// malformed index is an error for the whole catalog. Files the index does
// not list are never read. compile, which must not be nil, compiles the
// descriptions of connectors of type openapi. Connector ids must be slugs
// (switchboard.ValidSlug) and equal their folder.
func LoadCatalog(fsys fs.FS, compile Compiler) (*Catalog, error) {
	return LoadCatalogWith(fsys, compile, LoadOptions{})
}

// LoadCatalogWith is LoadCatalog with options: when opts.Keys is not
// empty, the index's signature (SignatureName, beside the index) is checked
// first, and a missing or bad signature refuses the whole catalog.
func LoadCatalogWith(fsys fs.FS, compile Compiler, opts LoadOptions) (*Catalog, error) {
	if compile == nil {
		return nil, switchboard.E(switchboard.ErrInvalid, "catalog_invalid", "loading catalog: no compiler")
	}
	raw, err := fs.ReadFile(fsys, IndexName)
	if err != nil {
		return nil, switchboard.E(switchboard.ErrInvalid, "catalog_invalid", "reading catalog index %s", IndexName).WithCause(err)
	}
	signed := false
	if len(opts.Keys) > 0 {
		sig, err := fs.ReadFile(fsys, SignatureName)
		if err != nil {
			return nil, switchboard.E(switchboard.ErrInvalid, "catalog_unsigned",
				"catalog index %s has no signature %s, and catalog keys are configured", IndexName, SignatureName)
		}
		if err := VerifyIndex(raw, sig, opts.Keys); err != nil {
			return nil, err
		}
		signed = true
	}
	idx, err := parseIndex(raw)
	if err != nil {
		return nil, err
	}

	// Connectors load in parallel, one per processor: compiling a large
	// description is CPU-bound and independent of the others.
	type loaded struct {
		conn *Connector
		err  error
	}
	results := make([]loaded, len(idx.Connectors))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(idx.Connectors)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				conn, err := loadConnector(fsys, idx.Connectors[i], compile, opts)
				results[i] = loaded{conn, err}
			}
		}()
	}
	for i := range idx.Connectors {
		next <- i
	}
	close(next)
	wg.Wait()

	st := &catalogState{version: idx.Version, signed: signed, connectors: map[string]*Connector{}}
	for i, e := range idx.Connectors {
		conn, err := results[i].conn, results[i].err
		if err != nil {
			st.problems = append(st.problems, err)
			continue
		}
		st.connectors[e.ID] = conn
		st.list = append(st.list, conn)
		st.entries = append(st.entries, e)
	}
	slices.SortFunc(st.list, func(a, b *Connector) int { return strings.Compare(a.Manifest.ID, b.Manifest.ID) })
	slices.SortFunc(st.entries, func(a, b IndexEntry) int { return strings.Compare(a.ID, b.ID) })
	c := &Catalog{}
	c.st.Store(st)
	return c, nil
}

// ReadIndex reads and parses the index at the root of fsys: valid JSON, a
// known version, unique connector ids. It checks no file and no
// signature.
func ReadIndex(fsys fs.FS) (Index, error) {
	raw, err := fs.ReadFile(fsys, IndexName)
	if err != nil {
		return Index{}, switchboard.E(switchboard.ErrInvalid, "catalog_invalid", "reading catalog index %s", IndexName).WithCause(err)
	}
	return parseIndex(raw)
}

// parseIndex decodes and checks the structure of the catalog index: a known
// version, and unique, non-empty connector ids. Per-connector problems
// (paths, hashes) are left to loadConnector.
func parseIndex(raw []byte) (Index, error) {
	var idx Index
	if err := json.Unmarshal(raw, &idx); err != nil {
		return Index{}, switchboard.E(switchboard.ErrInvalid, "catalog_invalid", "catalog index %s is not valid JSON", IndexName).WithCause(err)
	}
	if idx.Version != IndexVersion {
		return Index{}, switchboard.E(switchboard.ErrInvalid, "catalog_invalid", "catalog index %s: unsupported version %d (want %d)", IndexName, idx.Version, IndexVersion)
	}
	seen := map[string]bool{}
	for i, e := range idx.Connectors {
		if e.ID == "" {
			return Index{}, switchboard.E(switchboard.ErrInvalid, "catalog_invalid", "catalog index %s: connector #%d has no id", IndexName, i)
		}
		if seen[e.ID] {
			return Index{}, switchboard.E(switchboard.ErrInvalid, "catalog_invalid", "catalog index %s: duplicate connector id %q", IndexName, e.ID)
		}
		seen[e.ID] = true
	}
	return idx, nil
}

// refuse returns the problem recorded for a connector the catalog refused.
func refuse(id, code, format string, args ...any) *switchboard.Error {
	return switchboard.E(switchboard.ErrInvalid, code, "connector %q refused: %s", id, fmt.Sprintf(format, args...))
}

// loadConnector verifies and loads one connector package; with compiled
// set, its registry is the compact one (see Compiled).
func loadConnector(fsys fs.FS, e IndexEntry, compile Compiler, opts LoadOptions) (*Connector, error) {
	compiled := opts.Compiled
	if !switchboard.ValidSlug(e.ID) {
		return nil, refuse(e.ID, "connector_invalid", "id is not a valid slug")
	}
	if e.Folder != e.ID {
		return nil, refuse(e.ID, "connector_invalid", "folder %q does not match id", e.Folder)
	}

	files := make(map[string][]byte, len(e.Files))
	for _, f := range e.Files {
		if !cleanRelPath(f.Path) {
			return nil, refuse(e.ID, "connector_invalid", "file path %q is not a clean relative path", f.Path)
		}
		if _, dup := files[f.Path]; dup {
			return nil, refuse(e.ID, "connector_invalid", "file %q is listed twice", f.Path)
		}
		b, err := readVerified(fsys, e.Folder, f)
		if err != nil {
			return nil, refuse(e.ID, "connector_integrity", "file %q: %v", f.Path, err)
		}
		files[f.Path] = b
	}

	// fileRef returns a listed file referenced by the manifest or index.
	fileRef := func(what, p string) ([]byte, error) {
		if !cleanRelPath(p) {
			return nil, refuse(e.ID, "connector_invalid", "%s path %q is not a clean relative path", what, p)
		}
		b, ok := files[p]
		if !ok {
			return nil, refuse(e.ID, "connector_invalid", "%s %q is not listed in the catalog index", what, p)
		}
		return b, nil
	}

	raw, err := fileRef("manifest", manifestName)
	if err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, refuse(e.ID, "connector_invalid", "%s: %v", manifestName, err)
	}
	switch {
	case m.ID != e.ID:
		return nil, refuse(e.ID, "connector_invalid", "manifest id %q does not match the index", m.ID)
	case m.Version == "":
		return nil, refuse(e.ID, "connector_invalid", "manifest has no version")
	case m.Type != TypeOpenAPI && m.Type != TypeMCPRemote && m.Type != TypeMCPLocal:
		return nil, refuse(e.ID, "connector_invalid", "unknown connector type %q", m.Type)
	case m.Type != e.Type:
		return nil, refuse(e.ID, "connector_invalid", "manifest type %q does not match the index type %q", m.Type, e.Type)
	}

	// A package its own lint rejects is not served: what a connector
	// author was told is an error never reaches an agent.
	if opts.RefuseLintErrors {
		listed := make([]string, 0, len(files))
		for p := range files {
			listed = append(listed, p)
		}
		if errs := lintErrors(LintManifest(raw, e.Folder, listed)); len(errs) > 0 {
			return nil, refuse(e.ID, "connector_lint", "lint errors: %s (see switchboard connector lint)", strings.Join(errs, "; "))
		}
	}

	for _, ref := range []struct{ what, path string }{
		{"icon", e.IconSmall}, {"icon", e.IconLarge},
		{"icon", m.Icons.Small}, {"icon", m.Icons.Large},
	} {
		if ref.path == "" {
			continue
		}
		if _, err := fileRef(ref.what, ref.path); err != nil {
			return nil, err
		}
	}

	conn := &Connector{Manifest: m, Files: files}
	if m.Docs.Guide != "" {
		b, err := fileRef("guide", m.Docs.Guide)
		if err != nil {
			return nil, err
		}
		conn.Guide = string(b)
	}

	if m.Type == TypeOpenAPI {
		if m.OpenAPI == "" {
			return nil, refuse(e.ID, "connector_invalid", "type openapi without an openapi description")
		}
		spec, err := fileRef("openapi description", m.OpenAPI)
		if err != nil {
			return nil, err
		}
		var mapping []byte
		if m.Mapping != "" {
			if mapping, err = fileRef("mapping", m.Mapping); err != nil {
				return nil, err
			}
		}
		var api *Spec
		if compiled != nil {
			api, err = compiled.spec(compiled.key(fileSHA(e, m.OpenAPI), fileSHA(e, m.Mapping)), spec, mapping, compile)
		} else {
			api, err = compile(spec, mapping)
		}
		if err != nil {
			return nil, refuse(e.ID, "connector_invalid", "compiling %s: %v", m.OpenAPI, err)
		}
		if api == nil {
			return nil, refuse(e.ID, "connector_invalid", "compiling %s: no registry", m.OpenAPI)
		}
		conn.Spec = api
	}
	apps, err := CompileApps(&m, files, conn.Spec)
	if err != nil {
		return nil, err
	}
	conn.Apps = apps
	return conn, nil
}

// fileSHA is the lower-case hex sha256 the index records for a file of
// the connector's package (which its bytes were verified against), or ""
// for none.
func fileSHA(e IndexEntry, p string) string {
	if p == "" {
		return ""
	}
	for _, f := range e.Files {
		if f.Path == p {
			return strings.ToLower(f.SHA256)
		}
	}
	return ""
}

// readVerified reads one listed file and checks its size and sha256. The
// size is checked before the content is read, and never more than the
// recorded size plus one byte is read.
func readVerified(fsys fs.FS, folder string, f IndexFile) ([]byte, error) {
	want, err := hex.DecodeString(f.SHA256)
	if err != nil || len(want) != sha256.Size {
		return nil, errors.New("the recorded sha256 is not 64 hex digits")
	}
	if f.Size < 0 {
		return nil, errors.New("the recorded size is negative")
	}
	file, err := fsys.Open(path.Join(folder, f.Path))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("missing")
		}
		return nil, errors.New("cannot be opened")
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, errors.New("cannot be read")
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() != f.Size {
		return nil, fmt.Errorf("size %d does not match the recorded %d", st.Size(), f.Size)
	}
	b, err := io.ReadAll(io.LimitReader(file, f.Size+1))
	if err != nil {
		return nil, errors.New("cannot be read")
	}
	if int64(len(b)) != f.Size {
		return nil, fmt.Errorf("size %d does not match the recorded %d", len(b), f.Size)
	}
	got := sha256.Sum256(b)
	if !bytes.Equal(got[:], want) {
		return nil, errors.New("sha256 does not match the catalog index")
	}
	return b, nil
}

// cleanRelPath reports whether p is a clean, slash-separated relative path
// inside its folder: no "..", no "." elements, no leading slash, no
// backslash, no empty elements.
func cleanRelPath(p string) bool {
	return p != "." && fs.ValidPath(p) && !strings.ContainsAny(p, `\:`) && !strings.HasPrefix(p, "/")
}

// HashCatalog rewrites the files list of every connector in the catalog
// index dir/connectors.json: the sha256 and size of every regular file
// under the connector's folder, sorted by path, skipping only dotfiles and
// dot-directories. The index is written deterministically (2-space
// indented JSON with a trailing newline); all other fields are kept. It is
// how the built-in catalog's index is maintained.
func HashCatalog(dir string) error {
	indexPath := filepath.Join(dir, IndexName)
	raw, err := os.ReadFile(indexPath)
	if err != nil {
		return fmt.Errorf("reading catalog index: %w", err)
	}
	idx, err := parseIndex(raw)
	if err != nil {
		return err
	}
	root := os.DirFS(dir)
	for i := range idx.Connectors {
		e := &idx.Connectors[i]
		if !cleanRelPath(e.Folder) || strings.Contains(e.Folder, "/") {
			return switchboard.E(switchboard.ErrInvalid, "catalog_invalid", "connector %q: folder %q is not a single clean path element", e.ID, e.Folder)
		}
		files, err := hashFolder(root, e.Folder)
		if err != nil {
			return fmt.Errorf("hashing connector %q: %w", e.ID, err)
		}
		e.Files = files
	}

	return writeIndex(dir, idx, raw)
}

// writeIndex writes idx to dir/connectors.json deterministically (2-space
// indented JSON with a trailing newline), atomically, unless it encodes to
// previous.
func writeIndex(dir string, idx Index, previous []byte) error {
	indexPath := filepath.Join(dir, IndexName)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(idx); err != nil {
		return fmt.Errorf("encoding catalog index: %w", err)
	}
	if bytes.Equal(buf.Bytes(), previous) {
		return nil
	}
	tmp, err := os.CreateTemp(dir, "."+IndexName+".*")
	if err != nil {
		return fmt.Errorf("writing catalog index: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("writing catalog index: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing catalog index: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing catalog index: %w", err)
	}
	if err := os.Rename(tmp.Name(), indexPath); err != nil {
		return fmt.Errorf("writing catalog index: %w", err)
	}
	return nil
}

// hashFolder returns the integrity records of every regular, non-dot file
// under folder in fsys, sorted by path relative to folder.
func hashFolder(fsys fs.FS, folder string) ([]IndexFile, error) {
	files := []IndexFile{}
	err := fs.WalkDir(fsys, folder, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != folder && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files = append(files, IndexFile{
			Path:   strings.TrimPrefix(p, folder+"/"),
			SHA256: hex.EncodeToString(sum[:]),
			Size:   int64(len(b)),
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b IndexFile) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// lintErrors lists, bounded, the errors among lint findings.
func lintErrors(findings []Finding) []string {
	var out []string
	for _, f := range findings {
		if f.Severity != SeverityError {
			continue
		}
		if len(out) == maxNamedLint {
			out = append(out, "…")
			break
		}
		out = append(out, truncateBytes(f.Path+": "+f.Message, 160))
	}
	return out
}

// maxNamedLint bounds the lint errors a refusal names.
const maxNamedLint = 3
