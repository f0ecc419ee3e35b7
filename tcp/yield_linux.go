package tcp

import "syscall"

// yield gives this thread's CPU to any other runnable thread (sched_yield).
func yield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
