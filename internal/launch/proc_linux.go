package launch

import "syscall"

// sysProcAttr puts each rank in its own process group, so the launcher forwards a
// terminal's Ctrl-C exactly once and can signal a rank's children with it, and asks the
// kernel to kill the rank if the launcher itself dies (a launcher killed with SIGKILL
// must not leave orphan ranks holding ports and memory).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
