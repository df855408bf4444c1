package registry

import (
	"os/exec"

	"github.com/switchboardhq/switchboard"
)

// Runtimes are the programs a requirement of an mcp_local connector
// names: one of them must be on the server's PATH.
var Runtimes = map[string][]string{
	"NODE":   {"node"},
	"PYTHON": {"python3", "python"},
	"DOCKER": {"docker"},
}

// CheckRequires checks, for an mcp_local connector, that every runtime
// its manifest requires (NODE, PYTHON, DOCKER) is installed, with
// lookPath (exec.LookPath when nil): an unmet one is a requirement_unmet
// error naming it, at install rather than at the first call.
func CheckRequires(m *Manifest, lookPath func(string) (string, error)) error {
	if m.Type != TypeMCPLocal {
		return nil
	}
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	for _, r := range m.Requires {
		progs, ok := Runtimes[r]
		if !ok {
			continue
		}
		found := false
		for _, p := range progs {
			if _, err := lookPath(p); err == nil {
				found = true
				break
			}
		}
		if !found {
			return switchboard.E(switchboard.ErrUnavailable, "requirement_unmet",
				"connector %s requires %s (%s), which is not installed on this server: the operator must install it first", m.ID, r, progs[0])
		}
	}
	return nil
}
