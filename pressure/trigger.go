package pressure

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kernel limits on PSI trigger windows (kernel/sched/psi.c, Documentation/accounting/psi.rst).
const (
	// MinWindow is the shortest trigger window the kernel accepts.
	MinWindow = 500 * time.Millisecond
	// MaxWindow is the longest trigger window the kernel accepts.
	MaxWindow = 10 * time.Second
	// UnprivilegedWindowStep: without CAP_SYS_RESOURCE the window must be a multiple of it.
	UnprivilegedWindowStep = 2 * time.Second
)

// Trigger is one PSI trigger: notify when tasks were stalled for at least Stall
// within any Window. Written to the kernel as "some|full <stall_us> <window_us>".
type Trigger struct {
	// Full selects the "full" line (all non-idle tasks stalled) instead of "some".
	Full bool
	// Stall is the threshold: cumulative stall time within Window that fires the trigger.
	Stall time.Duration
	// Window is the moving window the stall is measured over.
	Window time.Duration
}

// String returns the trigger as the kernel reads it, without the terminating NUL:
// "some 100000 2000000".
func (t Trigger) String() string {
	kind := "some"
	if t.Full {
		kind = "full"
	}
	return fmt.Sprintf("%s %d %d", kind, t.Stall.Microseconds(), t.Window.Microseconds())
}

// Share is the stalled fraction of the window at which the trigger fires.
func (t Trigger) Share() float64 {
	if t.Window <= 0 {
		return 0
	}
	return float64(t.Stall) / float64(t.Window)
}

// ErrNeedsPrivilege is wrapped by [Trigger.Validate] when a window is valid only for
// an opener holding CAP_SYS_RESOURCE (in the initial or a user namespace).
var ErrNeedsPrivilege = errors.New("window needs CAP_SYS_RESOURCE")

// Validate checks the trigger against the kernel's rules before anything is written,
// so the caller gets an explanation instead of a bare EINVAL:
//   - the window lies in [500ms, 10s] and is a whole number of microseconds;
//   - the stall is positive, a whole number of microseconds, and no longer than the window;
//   - without CAP_SYS_RESOURCE (privileged false) the window is a multiple of 2 s.
//
// The last rule's error wraps [ErrNeedsPrivilege].
func (t Trigger) Validate(privileged bool) error {
	switch {
	case t.Window < MinWindow || t.Window > MaxWindow:
		return fmt.Errorf("trigger %q: window %s outside the kernel's range %s..%s", t, t.Window, MinWindow, MaxWindow)
	case t.Window%time.Microsecond != 0:
		return fmt.Errorf("trigger %q: window %s is not a whole number of microseconds", t, t.Window)
	case t.Stall <= 0:
		return fmt.Errorf("trigger %q: stall threshold %s must be positive", t, t.Stall)
	case t.Stall%time.Microsecond != 0:
		return fmt.Errorf("trigger %q: stall threshold %s is not a whole number of microseconds", t, t.Stall)
	case t.Stall > t.Window:
		return fmt.Errorf("trigger %q: stall threshold %s exceeds the window %s (the kernel requires stall <= window)", t, t.Stall, t.Window)
	case !privileged && t.Window%UnprivilegedWindowStep != 0:
		return fmt.Errorf("trigger %q: window %s is not a multiple of %s, which the kernel requires of openers without CAP_SYS_RESOURCE (open it from a user namespace, see ProbeShortWindows, or use 2s, 4s, 6s, 8s or 10s): %w",
			t, t.Window, UnprivilegedWindowStep, ErrNeedsPrivilege)
	}
	return nil
}

// ParseTrigger parses "some|full <stall_us> <window_us>" (the kernel's format).
// It does not validate the values; call [Trigger.Validate].
func ParseTrigger(s string) (Trigger, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return Trigger{}, fmt.Errorf("trigger %q: want \"some|full <stall_us> <window_us>\"", s)
	}
	var t Trigger
	switch f[0] {
	case "some":
	case "full":
		t.Full = true
	default:
		return Trigger{}, fmt.Errorf("trigger %q: kind %q is neither some nor full", s, f[0])
	}
	stall, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return Trigger{}, fmt.Errorf("trigger %q: stall_us: %w", s, err)
	}
	window, err := strconv.ParseUint(f[2], 10, 32)
	if err != nil {
		return Trigger{}, fmt.Errorf("trigger %q: window_us: %w", s, err)
	}
	t.Stall = time.Duration(stall) * time.Microsecond
	t.Window = time.Duration(window) * time.Microsecond
	return t, nil
}

// TriggerConfig configures [OpenTriggers].
type TriggerConfig struct {
	// Path is the pressure file: a cgroup v2 memory.pressure, /proc/pressure/memory, or
	// any other *.pressure file. Empty means the process's own cgroup's
	// memory.pressure where the kernel has one, else /proc/pressure/memory ([SelfPressurePath]).
	Path string
	// Triggers to arm, one file descriptor each. At least one.
	Triggers []Trigger
	// UserNS opens triggers whose window needs CAP_SYS_RESOURCE through a helper
	// re-executed in a new user namespace ([ProbeShortWindows] says whether that works).
	// Without it such triggers are refused by Validate.
	UserNS bool
	// Buffer is the capacity of the events channel (default 16).
	Buffer int
}
