package deploy

import (
	"io/fs"
	"os"
	"path"
	"strings"
	"testing"
)

// dockerignored reports whether name is excluded by one of patterns, for
// the forms .dockerignore here uses: a plain path or glob from the context
// root, and "**/" followed by a glob matching at any depth.
func dockerignored(patterns []string, name string) bool {
	parts := strings.Split(name, "/")
	for _, p := range patterns {
		anyDepth := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "**/"), "/")
		for i := range parts {
			if i > 0 && !anyDepth {
				break
			}
			// A pattern matching a directory excludes everything below it.
			for j := i + 1; j <= len(parts); j++ {
				if ok, _ := path.Match(p, strings.Join(parts[i:j], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// The embedded store, its master key file and the rest of a data
// directory never enter the image's build context; the sources the build
// needs do.
func TestDockerignoreKeepsDataOut(t *testing.T) {
	b, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	for _, name := range []string{
		"data/master.key", "data/switchboard.db", "data/switchboard.db-wal", "data/verify/x",
		"data/catalog-cache/connectors.json", "other-data/master.key", "elsewhere/switchboard.db",
		"prod.key", "catalog.key", ".env", ".git/config",
	} {
		if !dockerignored(patterns, name) {
			t.Errorf("%s would enter the image", name)
		}
	}
	needed := []string{"go.mod", "go.sum", "deploy/Dockerfile"}
	// Every source and embedded file of the module.
	err = fs.WalkDir(os.DirFS(".."), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.IsDir() && (d.Name() == ".git" || d.Name() == "data") {
				return fs.SkipDir
			}
			return err
		}
		if strings.HasPrefix(name, "catalog/builtin/") || strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".sql") || name == "api/openapi.json" {
			needed = append(needed, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range needed {
		if dockerignored(patterns, name) {
			t.Errorf("%s, needed by the build, is ignored", name)
		}
	}
}
