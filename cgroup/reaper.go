package cgroup

import (
	"sync/atomic"
	"syscall"
)

// Reaper reaps zombie children of this process that nobody else waits for: orphans
// re-parented to a child subreaper ([SetChildSubreaper]). It only ever waits for a
// specific PID that is already a zombie and that keep does not claim, so children owned
// by os/exec (whose Wait must see their status) are left alone as long as keep returns
// true for them. Create one with [NewReaper].
type Reaper struct {
	keep   func(pid int) bool
	onReap func(pid int, status syscall.WaitStatus)
	reaped atomic.Uint64
	proc   string
}

// NewReaper returns a reaper. keep reports PIDs the caller waits for itself (nil: none;
// then every zombie child is reaped, which breaks exec.Cmd.Wait for children started by
// other code). onReap, if set, is called for each reaped PID with its wait status.
func NewReaper(keep func(pid int) bool, onReap func(pid int, status syscall.WaitStatus)) *Reaper {
	if keep == nil {
		keep = func(int) bool { return false }
	}
	return &Reaper{keep: keep, onReap: onReap, proc: "/proc"}
}

// Reaped returns how many processes the reaper has reaped.
func (r *Reaper) Reaped() uint64 { return r.reaped.Load() }
