package openapi

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	switchboard "github.com/switchboardhq/switchboard"
)

// Bundle reads a description split over files (relative $refs to sibling
// files, with or without a #/fragment) and returns it as one JSON document
// with every external reference made internal, using kin-openapi's loader
// and InternalizeRefs. It never fetches a URL, and refuses any reference
// that leaves the root file's directory tree.
func Bundle(root string) ([]byte, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(abs)
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	loader.Context = context.Background()
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		if (u.Scheme != "" && u.Scheme != "file") || u.Host != "" {
			return nil, switchboard.E(switchboard.ErrInvalid, "external_reference", "the description refers to %q: only files beside it are bundled, never a URL", truncate(u.String(), 120))
		}
		p, err := filepath.Abs(filepath.FromSlash(u.Path))
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, switchboard.E(switchboard.ErrInvalid, "external_reference", "the description refers to %q, outside its directory", truncate(u.Path, 120))
		}
		return os.ReadFile(p)
	}
	doc, err := loader.LoadFromFile(abs)
	if err != nil {
		return nil, invalidOpenAPI(err)
	}
	doc.InternalizeRefs(loader.Context, nil)
	b, err := doc.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding the bundled description: %w", err)
	}
	return b, nil
}
