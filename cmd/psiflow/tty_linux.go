//go:build linux

package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// terminalForeground reports whether standard input is a terminal whose foreground
// process group is this process's: psiflow was started as a terminal's foreground
// job, so Ctrl-C and a hang-up reach every process of its process group.
func terminalForeground() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pgrp == syscall.Getpgrp()
}
