package browser

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills Chromium when the server dies, as chromedp does by
// default.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = new(syscall.SysProcAttr)
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
