package pressure

import (
	"errors"
	"sync/atomic"
)

// ErrNoHelper is why a trigger that needs the user-namespace helper (a window that is
// not a multiple of 2 s, without CAP_SYS_RESOURCE) cannot be armed in a program that
// did not call [RunHelper] first: the helper is the running binary re-executed, which
// would otherwise run the whole program a second time. [Open] then says so among the
// sources it rejected and picks the next one.
var ErrNoHelper = errors.New("the user-namespace helper re-executes this program, which does not call pressure.RunHelper (or reexec.Init) first thing in main and TestMain")

// helperCalled records that this program called RunHelper.
var helperCalled atomic.Bool

// RunHelper is this package's re-exec entry point. Call it first thing in main (and
// in TestMain of any test binary that opens pressure sources), or call reexec.Init,
// which calls it. When this process is the user-namespace helper (the running binary
// re-executed with CLONE_NEWUSER to arm a short-window PSI trigger and pass it back),
// RunHelper runs it and never returns. Otherwise it returns at once and records that
// the helper may be started; without that call such triggers fail with [ErrNoHelper].
//
// The helper is selected by PSIFLOW_PSI_USERNS_HELPER, which this package sets for
// its own child only; this is the only place the package reads it.
func RunHelper() {
	runHelper()
	helperCalled.Store(true)
}
