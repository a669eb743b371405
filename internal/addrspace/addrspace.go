package addrspace

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/kernfile"
)

// Unlimited is the limit reported when RLIMIT_AS is infinite (or the platform has
// none).
const Unlimited = int64(1<<63 - 1)

// HeapReserve is the address space kept for the Go heap's growth: the runtime
// maps the heap in 64 MiB arenas, and a loader's own heap (its buffers come from
// mappings that are checked one by one) stays within two more of them.
const HeapReserve = 2 * 64 << 20

// Status is the process's virtual-memory limit and use at one moment.
type Status struct {
	// Limit is the soft RLIMIT_AS in bytes; [Unlimited] when none.
	Limit int64
	// Mapped is the address space the process has mapped (VmSize).
	Mapped int64
	// ThreadStack is the address space one more thread takes: the C library's
	// default pthread stack (the soft RLIMIT_STACK, glibc's default; 8 MiB on most
	// hosts) plus its guard page.
	ThreadStack int64
	// Threads is the number of threads the reserve keeps room for, beyond those
	// already running.
	Threads int
}

// Limited reports whether a virtual-memory limit applies.
func (s Status) Limited() bool { return s.Limit < Unlimited }

// Reserve is the address space kept free for the Go runtime: [HeapReserve] plus
// Threads thread stacks.
func (s Status) Reserve() int64 { return HeapReserve + int64(s.Threads)*s.ThreadStack }

// Available is the address space that may still be mapped with the reserve kept
// (negative when the reserve itself does not fit; [Unlimited] without a limit).
func (s Status) Available() int64 {
	if !s.Limited() {
		return Unlimited
	}
	return s.Limit - s.Mapped - s.Reserve()
}

// CheckStart returns nil when a command that maps need bytes beyond what the process
// holds at start (its measured address space, the reserve included) fits under the
// limit, else an error naming the command, the figures and the smallest limit that
// would do.
func (s Status) CheckStart(command string, need int64) error {
	if !s.Limited() || s.Mapped+need <= s.Limit {
		return nil
	}
	const step = 256 << 20
	want := (s.Mapped + need + step - 1) / step * step
	return fmt.Errorf("%w of %s is too small for psiflow %s: the Go runtime and its libraries mapped %s before psiflow started (the runtime reserves 0.7–1.2 GiB of address space it never touches) and %s needs about %s more; raise it to at least %s (ulimit -v %d)%s",
		ErrLimit, size(s.Limit), command, size(s.Mapped), command, size(need), size(want), want>>10, Advice)
}

// Fit returns nil when n more bytes can be mapped for what (a name for the error)
// with the reserve kept, else a [*FitError] with the figures.
func (s Status) Fit(what string, n int64) error {
	if !s.Limited() || n <= s.Available() {
		return nil
	}
	return &FitError{What: what, Bytes: n, Status: s}
}

// ErrLimit is wrapped by every error of this package that a virtual-memory limit
// causes.
var ErrLimit = errors.New("virtual-memory limit (RLIMIT_AS, ulimit -v)")

// FitError is a mapping that does not fit under the virtual-memory limit.
type FitError struct {
	What   string // the mapping, e.g. `uma arena "read-spill"`
	Bytes  int64
	Status Status
}

func (e *FitError) Error() string {
	s := e.Status
	return fmt.Sprintf("%s: %s of address space does not fit under the %v of %s: %s is mapped already and %s is kept for the Go heap and %d thread stacks of %s (%s free); raise the limit or lower the budget%s",
		e.What, size(e.Bytes), ErrLimit, size(s.Limit), size(s.Mapped), size(s.Reserve()), s.Threads, size(s.ThreadStack), size(max(0, s.Available())), Advice)
}

// Unwrap returns [ErrLimit].
func (e *FitError) Unwrap() error { return ErrLimit }

// Advice ends every limit error: what the user can do.
const Advice = "; ulimit -v unlimited lifts it; a cgroup memory limit (psiflow cgroup run -memory-max) bounds real memory without counting reserved address space"

// DefaultThreads is the number of threads the reserve keeps room for beyond those
// already running: one per GOMAXPROCS plus eight for system calls that block
// (reads, waits on pressure files, the signal loop). Measured: psiflow has 5–7
// threads when main starts and 12–13 while `psiflow run` reads and decodes with
// GOMAXPROCS=2.
func DefaultThreads() int { return runtime.GOMAXPROCS(0) + 8 }

// Current returns the process's status now, with [DefaultThreads].
func Current() (Status, error) {
	s := Status{Limit: Unlimited, Threads: DefaultThreads()}
	lim, err := limits()
	if err != nil {
		return s, fmt.Errorf("addrspace: %w", err)
	}
	s.Limit, s.ThreadStack = lim.as, lim.stack
	if !s.Limited() {
		return s, nil
	}
	if s.Mapped, err = mapped("/proc/self/status"); err != nil {
		return s, fmt.Errorf("addrspace: %w", err)
	}
	return s, nil
}

// mapped returns VmSize from a /proc/<pid>/status file, in bytes.
func mapped(path string) (int64, error) {
	b, err := kernfile.ReadSizes(path, "VmSize:")
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

// size formats bytes for messages ([bytesize.Human]).
func size(b int64) string {
	if b >= Unlimited {
		return "unlimited"
	}
	return bytesize.Human(b)
}

// CapMemoryLimit caps a memory limit (a cgroup limit or MemTotal, named by source)
// at the address space this process can still map with the reserve kept, so that
// budgets and arenas sized from it fit under RLIMIT_AS. Without a virtual-memory
// limit, or when the memory limit is the smaller, it returns its arguments.
func CapMemoryLimit(limit int64, source string) (int64, string, error) {
	st, err := Current()
	if err != nil {
		return 0, "", err
	}
	return st.CapMemoryLimit(limit, source)
}

// CapMemoryLimit is [CapMemoryLimit] against s.
func (s Status) CapMemoryLimit(limit int64, source string) (int64, string, error) {
	if !s.Limited() || limit <= s.Available() {
		return limit, source, nil
	}
	if s.Available() <= 0 {
		return 0, "", &FitError{What: "the memory limit " + size(limit) + " (" + source + ")", Bytes: limit, Status: s}
	}
	return s.Available(), fmt.Sprintf("RLIMIT_AS (ulimit -v) %s less %s mapped and %s kept for the Go runtime; %s from %s",
		size(s.Limit), size(s.Mapped), size(s.Reserve()), size(limit), source), nil
}
