package pressure

import (
	"fmt"
	"time"
)

// Signal says what an [Event] reports.
type Signal int

const (
	// SignalSome: a "some" PSI trigger fired, or a polled "some" share was measured.
	SignalSome Signal = iota + 1
	// SignalFull: a "full" PSI trigger fired, or a polled "full" share was measured.
	SignalFull
	// SignalVMLow: cgroup v1 vmpressure "low" (reclaim is running).
	SignalVMLow
	// SignalVMMedium: cgroup v1 vmpressure "medium".
	SignalVMMedium
	// SignalVMCritical: cgroup v1 vmpressure "critical" (about to OOM).
	SignalVMCritical
	// SignalMemHigh: memory.events "high" grew (v2): usage went over memory.high.
	SignalMemHigh
	// SignalMemMax: memory.events "max" grew (v2), or memory.failcnt grew (v1):
	// usage hit the limit and reclaim ran.
	SignalMemMax
	// SignalOOM: memory.events "oom" grew: the cgroup went out of memory.
	SignalOOM
	// SignalOOMKill: memory.events or memory.oom_control "oom_kill" grew: a process was killed.
	SignalOOMKill
)

var signalNames = [...]string{
	SignalSome:       "some",
	SignalFull:       "full",
	SignalVMLow:      "vm_low",
	SignalVMMedium:   "vm_medium",
	SignalVMCritical: "vm_critical",
	SignalMemHigh:    "mem_high",
	SignalMemMax:     "mem_max",
	SignalOOM:        "oom",
	SignalOOMKill:    "oom_kill",
}

// String returns the signal's metric label, e.g. "some" or "oom_kill".
func (s Signal) String() string {
	if s > 0 && int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// Event is one observation from a [Source].
type Event struct {
	// Time is when the source observed the event.
	Time time.Time
	// Source names the source and its file, e.g. "psi-trigger /sys/fs/cgroup/x/memory.pressure".
	Source string
	// Signal is what was observed.
	Signal Signal
	// Share is the stalled fraction of Window in [0, 1] for SignalSome and SignalFull:
	// the trigger's threshold divided by its window for a trigger (a lower bound:
	// the kernel fired because at least that much stall happened), the measured
	// share over the interval for the poller. Zero for other signals.
	Share float64
	// Window is the trigger window or the polling interval; zero for other signals.
	Window time.Duration
	// Count is how many times the signal happened since the previous event of this
	// kind from this source (eventfd counter, memory.events increment); 1 for a trigger.
	Count uint64
	// Polled is true for events derived from sampling rather than from a kernel
	// notification. A polled share is measured over one interval and may be zero:
	// it then says "no stall", which lets the model leave a level early.
	Polled bool
}

// String formats the event for logs and "psiflow pressure watch".
func (e Event) String() string {
	s := fmt.Sprintf("%s %s", e.Time.Format("15:04:05.000"), e.Signal)
	if e.Window > 0 {
		s += fmt.Sprintf(" share=%.2f%% window=%s", 100*e.Share, e.Window)
	}
	if e.Count > 1 {
		s += fmt.Sprintf(" count=%d", e.Count)
	}
	return s + " (" + e.Source + ")"
}

// Source delivers pressure events on a channel.
//
// A source starts delivering when it is opened and stops when the context given to
// its constructor is cancelled or when it fails; then Events is closed and Err says
// why (nil after cancellation). Every goroutine a source starts has ended by the
// time Events is closed. A consumer must keep reading Events until it is closed,
// or cancel the context: a source never drops a kernel notification silently, but it
// may coalesce several into one event (Count).
type Source interface {
	// Events returns the channel of events; it is closed when the source ends.
	Events() <-chan Event
	// Err returns why the source ended; call it after Events is closed.
	Err() error
	// Describe says what the source watches, e.g. "psi triggers some 100000 2000000 on /proc/pressure/memory".
	Describe() string
}
