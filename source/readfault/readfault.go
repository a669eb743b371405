//go:build unix

package readfault

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/psiflow/psiflow/source"
)

// Op is what a rule applies to.
type Op int

// The operations.
const (
	// Read: each read system call (pread) or submission (io_uring).
	Read Op = iota
	// Open: each open of a dataset file.
	Open
)

// Rule injects one kind of fault into the operations it matches.
type Rule struct {
	// Name matches a file by base name ("b.jpg") or full path; "" matches every file.
	Name string
	// Op is the operation the rule applies to.
	Op Op
	// From is, for reads, the offset at which the fault starts: a read
	// wholly before it is untouched, one that reaches it is cut short at it
	// (the bytes before a bad sector arrive), and one at or after it gets
	// the fault.
	From int64
	// Times is how many faults the rule injects; 0 means every time.
	Times int
	// Fault is what a matching read suffers.
	Fault source.Fault
	// Replace, for opens, replaces the file by a named pipe before the open.
	Replace bool
	// OpenErr, for opens, fails the open with it.
	OpenErr error
	// Remove, for opens, removes the file before the open, as if it was deleted
	// after the file list was taken.
	Remove bool
	// Truncate, for reads, truncates the file to Size bytes before the first
	// read that reaches From, which then reads the file as it is now: a file cut
	// while it is being read (after its size was taken).
	Truncate bool
	Size     int64
}

// EIO fails every read of the file named name at or after offset from
// with EIO (reads that reach from are first cut short there).
func EIO(name string, from int64) Rule {
	return Rule{Name: name, From: from, Fault: source.Fault{Err: syscall.EIO}}
}

// Short makes the next times reads of name short: n bytes each.
func Short(name string, n, times int) Rule {
	return Rule{Name: name, Times: times, Fault: source.Fault{Short: n}}
}

// EINTR fails the next times reads of name with EINTR.
func EINTR(name string, times int) Rule {
	return Rule{Name: name, Times: times, Fault: source.Fault{Err: syscall.EINTR}}
}

// FIFO replaces name by a named pipe just before it is first opened, as if
// it had been swapped after the file list was taken.
func FIFO(name string) Rule { return Rule{Name: name, Op: Open, Times: 1, Replace: true} }

// Vanish removes name just before it is first opened, as if it had been deleted
// after the file list was taken.
func Vanish(name string) Rule { return Rule{Name: name, Op: Open, Times: 1, Remove: true} }

// Truncate cuts name to size bytes just before the first read that reaches
// from, as if it was truncated while being read.
func Truncate(name string, from, size int64) Rule {
	return Rule{Name: name, From: from, Times: 1, Truncate: true, Size: size}
}

// Event is one fault injected.
type Event struct {
	Op   Op
	Path string
	Off  int64
	N    int
	// What was done: "EIO", "short 4096", "EINTR", "fifo", "open: …".
	What string
}

// String formats the event for test logs.
func (e Event) String() string {
	if e.Op == Open {
		return fmt.Sprintf("open %s: %s", e.Path, e.What)
	}
	return fmt.Sprintf("read %s [%d, +%d): %s", e.Path, e.Off, e.N, e.What)
}

// Injector applies rules. It satisfies [source.FaultInjector] and is safe
// for concurrent use (the readers run on several workers).
type Injector struct {
	mu     sync.Mutex
	rules  []Rule
	used   []int
	events []Event
}

// New returns an injector of rules, consulted in order (the first that
// matches applies).
func New(rules ...Rule) *Injector {
	return &Injector{rules: rules, used: make([]int, len(rules))}
}

func (r *Rule) matches(path string) bool {
	return r.Name == "" || r.Name == path || r.Name == filepath.Base(path)
}

// Open implements [source.FaultInjector].
func (in *Injector) Open(path string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := range in.rules {
		r := &in.rules[i]
		if r.Op != Open || !r.matches(path) || (r.Times > 0 && in.used[i] >= r.Times) {
			continue
		}
		in.used[i]++
		switch {
		case r.OpenErr != nil:
			in.events = append(in.events, Event{Op: Open, Path: path, What: "open: " + r.OpenErr.Error()})
			return r.OpenErr
		case r.Remove:
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("readfault: removing %s: %w", path, err)
			}
			in.events = append(in.events, Event{Op: Open, Path: path, What: "removed"})
		case r.Replace:
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("readfault: replacing %s: %w", path, err)
			}
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				return fmt.Errorf("readfault: replacing %s: %w", path, err)
			}
			in.events = append(in.events, Event{Op: Open, Path: path, What: "fifo"})
		}
		return nil
	}
	return nil
}

// Read implements [source.FaultInjector].
func (in *Injector) Read(path string, off int64, n int) source.Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := range in.rules {
		r := &in.rules[i]
		if r.Op != Read || !r.matches(path) || (r.Times > 0 && in.used[i] >= r.Times) || off+int64(n) <= r.From {
			continue
		}
		if r.Truncate {
			in.used[i]++
			what := fmt.Sprintf("truncated to %d", r.Size)
			if err := os.Truncate(path, r.Size); err != nil {
				what = "truncate: " + err.Error()
			}
			in.events = append(in.events, Event{Op: Read, Path: path, Off: off, N: n, What: what})
			return source.Fault{}
		}
		f := r.Fault
		if off < r.From {
			f = source.Fault{Short: int(r.From - off)} // up to the bad spot
		}
		in.used[i]++
		what := fmt.Sprintf("short %d", f.Short)
		if f.Err != 0 {
			what = errnoName(f.Err)
		}
		in.events = append(in.events, Event{Op: Read, Path: path, Off: off, N: n, What: what})
		return f
	}
	return source.Fault{}
}

// Events returns the faults injected so far, in order.
func (in *Injector) Events() []Event {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Event(nil), in.events...)
}

// Count returns how many faults rule i (in the order given to New) injected.
func (in *Injector) Count(i int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.used[i]
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EIO:
		return "EIO"
	case syscall.EINTR:
		return "EINTR"
	case syscall.EAGAIN:
		return "EAGAIN"
	}
	return e.Error()
}
