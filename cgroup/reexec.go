package cgroup

import (
	"errors"
	"sync/atomic"
)

// ErrNoHelper is the error of [Group.Start] (on its blocked path) and [Group.Watch]
// in a program that did not call [RunHelper] first: both re-execute the running
// binary, which would otherwise run the whole program a second time instead of the
// helper.
var ErrNoHelper = errors.New("this program re-executes itself as a helper but does not call cgroup.RunHelper (or reexec.Init) first thing in main and TestMain")

// helperCalled records that this program called RunHelper, and so that a copy of it
// re-executed as a helper runs the helper.
var helperCalled atomic.Bool

// RunHelper is this package's re-exec entry point. Call it first thing in main (and
// in TestMain of any test binary that starts groups), or call reexec.Init, which calls
// it. When this process is one of the package's helpers, the running binary
// re-executed by [Group.Start] (the trampoline that waits until the child is in its
// cgroups, then execs the program) or by [Group.Watch] (the watchdog), RunHelper runs
// it and never returns. Otherwise it returns at once, and records that helpers may be
// started: without that call Start's blocked path and Watch refuse with [ErrNoHelper].
//
// The helpers are selected by the environment variables PSIFLOW_CGROUP_START_FD and
// PSIFLOW_CGROUP_WATCH_FD, which this package sets for its own children only; this
// is the only place the package reads them.
func RunHelper() {
	runHelper()
	helperCalled.Store(true)
}
