// Package catalog holds Switchboard's built-in connector catalog: the
// connectors shipped inside the binary, with their catalog index.
//
// The catalog lives in the builtin directory: connectors.json (the index,
// the root of trust) and one folder per connector holding connector.json,
// the OpenAPI description, the agent-facing guide.md and the icons. Load it
// with registry.LoadCatalog(catalog.FS(), openapi.Compile).
//
// After changing any file under builtin, regenerate the index's hashes:
//
//	go generate ./catalog
//
// which runs the package's index test with -update (registry.HashCatalog on
// the builtin directory). The test without -update fails while the index
// is stale, so CI catches a forgotten regeneration.
package catalog

//go:generate go test -run TestIndexIsCurrent -update .

import (
	"embed"
	"io/fs"
)

// builtin is the built-in catalog. "all:" embeds files starting with "_"
// too, which registry.HashCatalog lists; dotfiles it may pull in are not in
// the index and so are never read.
//
//go:embed all:builtin
var builtin embed.FS

// Dir is the built-in catalog's directory relative to this package's
// source directory, for tools that maintain it on disk.
const Dir = "builtin"

// FS returns the built-in catalog: a file system whose root holds
// connectors.json and the connector folders.
func FS() fs.FS {
	sub, err := fs.Sub(builtin, Dir)
	if err != nil {
		// fs.Sub fails only for an invalid path; Dir is a constant.
		panic("catalog: " + err.Error())
	}
	return sub
}
