package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/switchboardhq/switchboard"
)

// IndexChanges says what IndexCatalog did to the index.
type IndexChanges struct {
	// Added and Updated are connector ids whose entries were created or
	// refreshed from their manifests; Removed are entries whose folder
	// no longer holds a connector.json.
	Added, Updated, Removed []string
}

// IndexCatalog creates or updates dir/connectors.json from the connector
// folders of dir: every immediate subfolder holding a connector.json gets
// an entry with the summary the index carries (id, name, type, scope,
// icons, description, requires, tags, auth, folder) taken from its
// manifest, entries of folders that are gone are dropped, and then every
// file is hashed (HashCatalog). A manifest that does not parse, or whose
// id differs from its folder name, is an error naming the folder and
// nothing is written.
func IndexCatalog(dir string) (IndexChanges, error) {
	var changes IndexChanges
	idx := Index{Version: IndexVersion}
	indexPath := filepath.Join(dir, IndexName)
	raw, err := os.ReadFile(indexPath)
	switch {
	case err == nil:
		if idx, err = parseIndex(raw); err != nil {
			return changes, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return changes, fmt.Errorf("reading catalog index: %w", err)
	}
	folders, err := os.ReadDir(dir)
	if err != nil {
		return changes, fmt.Errorf("reading catalog directory: %w", err)
	}
	old := map[string]IndexEntry{}
	for _, e := range idx.Connectors {
		old[e.ID] = e
	}
	var entries []IndexEntry
	for _, f := range folders {
		if !f.IsDir() || strings.HasPrefix(f.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Name(), ManifestFile))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return changes, fmt.Errorf("connector folder %s: %w", f.Name(), err)
		}
		e, err := indexEntryOf(f.Name(), b)
		if err != nil {
			return changes, err
		}
		if prev, ok := old[e.ID]; ok {
			e.Files = prev.Files
			delete(old, e.ID)
			changes.Updated = append(changes.Updated, e.ID)
		} else {
			changes.Added = append(changes.Added, e.ID)
		}
		entries = append(entries, e)
	}
	for id := range old {
		changes.Removed = append(changes.Removed, id)
	}
	slices.Sort(changes.Removed)
	// Connectors keep their order in an existing index; new ones follow,
	// sorted by id.
	order := map[string]int{}
	for i, e := range idx.Connectors {
		order[e.ID] = i
	}
	slices.SortStableFunc(entries, func(a, b IndexEntry) int {
		ia, oka := order[a.ID]
		ib, okb := order[b.ID]
		switch {
		case oka && okb:
			return ia - ib
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	idx.Connectors = entries
	if idx.Connectors == nil {
		idx.Connectors = []IndexEntry{}
	}
	if err := writeIndex(dir, idx, raw); err != nil {
		return changes, err
	}
	return changes, HashCatalog(dir)
}

// indexEntryOf is the index entry a connector folder's manifest describes,
// without its files.
func indexEntryOf(folder string, manifest []byte) (IndexEntry, error) {
	var m Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return IndexEntry{}, switchboard.E(switchboard.ErrInvalid, "connector_invalid",
			"connector folder %s: %s does not parse (run switchboard connector lint %s)", folder, ManifestFile, folder).WithCause(err)
	}
	if m.ID != folder {
		return IndexEntry{}, switchboard.E(switchboard.ErrInvalid, "connector_invalid",
			"connector folder %s: the manifest id %q does not equal the folder name; rename the folder or set the id", folder, m.ID)
	}
	return IndexEntry{
		ID: m.ID, Name: m.Name, Type: m.Type, Scope: m.Scope,
		IconSmall: m.Icons.Small, IconLarge: m.Icons.Large, Description: m.Description,
		Requires: m.Requires, Tags: m.Tags,
		Auth:   AuthSummary{Type: m.Auth.Type, Provider: m.Auth.Provider, Scopes: m.Auth.Scopes},
		Folder: folder,
	}, nil
}
