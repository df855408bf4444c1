//go:build !unix

package verify

import (
	"os/exec"

	"github.com/switchboardhq/switchboard"
)

// errVerifyUnsupported is the answer on systems without process groups.
var errVerifyUnsupported = switchboard.E(switchboard.ErrUnavailable, "verify_unavailable",
	"verification commands need a Unix system")

// setProcessGroup is a no-op where process groups do not exist; Start then
// fails (see killProcessGroup), so no command runs unsupervised.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.Path = ""
	cmd.Err = errVerifyUnsupported
}

func killProcessGroup(int) error { return errVerifyUnsupported }
