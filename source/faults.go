package source

import "syscall"

// FaultInjector is consulted at the readers' system-call seam, so that tests
// can make opens and reads fail the way storage does (package
// source/readfault builds injectors from rules, as pebble's vfs/errorfs does
// for its file system). Both backends consult it: pread before each pread(2)
// call, io_uring before each read it submits (resubmissions of short reads
// included). Production code leaves [ReaderOptions.Faults] nil.
type FaultInjector interface {
	// Open is called before each open of a dataset file. A non-nil error
	// fails the open with it, without the system call. It may also change
	// the file system first (replace the file by a named pipe) and return
	// nil: the real open then meets what it left.
	Open(path string) error
	// Read is called before each read system call or submission of n bytes
	// of path at off; the [Fault] it returns is applied to that call.
	Read(path string, off int64, n int) Fault
}

// Fault is what one read call suffers.
type Fault struct {
	// Err, when not 0, fails the call with this errno instead of reading:
	// EIO as a bad sector gives, EINTR or EAGAIN as a signal or a busy
	// device give (the readers retry those).
	Err syscall.Errno
	// Short, when in (0, n), reads only the first Short bytes: a short read.
	Short int
}

// fault returns the length to read (n, or the short length) and the errno to
// fail with instead, for one read call. A short length under O_DIRECT
// (direct) is cut to a multiple of [Align], as the kernel's would be.
func (o *ReaderOptions) fault(path string, off int64, n int, direct bool) (int, syscall.Errno) {
	if o.Faults == nil {
		return n, 0
	}
	f := o.Faults.Read(path, off, n)
	if f.Err != 0 {
		return 0, f.Err
	}
	short := f.Short
	if direct {
		short = short / Align * Align
	}
	if short > 0 && short < n {
		return short, 0
	}
	return n, 0
}
