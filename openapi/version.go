package openapi

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// CompilerVersion names the compiler's output. Compiled registries are
// cached by it (see CompilerID); it is also part of the build identity,
// so a forgotten bump costs nothing but clarity.
const CompilerVersion = "6"

// CompilerID identifies this compiler for registry.Compiled: the compiler
// version plus the build, so that a registry compiled by one binary is
// never served by another whose compiler might differ. The build is the
// VCS revision stamped into a clean build, or else the sha256 of the
// running executable (go run, go test, a modified tree); "" when neither
// is known, and then nothing should be cached.
var CompilerID = sync.OnceValue(func() string {
	b := buildID()
	if b == "" {
		return ""
	}
	return "openapi/" + CompilerVersion + "/" + b
})

func buildID() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" && modified == "false" {
			return "vcs:" + rev
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return "exe:" + hex.EncodeToString(h.Sum(nil))
}
