//go:build !unix

package verify

import "os/exec"

// setProcessGroup is a no-op where process groups do not exist; Start then
// fails (see killProcessGroup), so no command runs unsupervised.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.Path = ""
	cmd.Err = errVerifyUnsupported
}

func killProcessGroup(int) error { return errVerifyUnsupported }
