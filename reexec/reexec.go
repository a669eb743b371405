package reexec

import (
	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/pressure"
)

// Init runs the psiflow helper this process was re-executed to be, and then exits;
// when the process is none of them, it returns at once. Call it first thing in main
// and in TestMain, before flags, logging or goroutines. Calling it again is harmless.
func Init() {
	cgroup.RunHelper()
	pressure.RunHelper()
}
