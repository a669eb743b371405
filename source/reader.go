package source

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// canceller is implemented by readers that can ask the kernel to cancel the
// reads in flight (io_uring): Cancel reports whether it did, and the reads
// then complete through Reap.
type canceller interface{ Cancel() bool }

// fixedReader is a reader that may read into buffers registered with its ring
// (io_uring), and can drop them before it closes ([Revocable]).
type fixedReader interface {
	FixedBuffers() bool
	UnregisterFixed() (bool, error)
}

// WaitReporter is implemented by iterators that can say which files their
// readers are waiting for (file datasets): a caller that gives up on a
// read the storage does not answer names them.
type WaitReporter interface {
	// Waiting returns the paths whose reads are waited for now.
	Waiting() []string
}

// Gate admits reads in two phases: a source acquires a permit, then takes a
// buffer, then submits; the Reader releases the permit when the read completes.
// pressure's gate and flow.Gate satisfy it.
type Gate interface {
	Acquire(ctx context.Context) error
	Release()
}

// Budget is a byte budget for bytes in flight. flow.Budget satisfies it.
type Budget interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}

// Backend names a reader implementation.
type Backend string

// The reader backends.
const (
	BackendURing Backend = "io_uring"
	BackendPread Backend = "pread"
)

// EnvIO is the environment variable that forces a backend: PSIFLOW_IO=pread
// disables io_uring; PSIFLOW_IO=io_uring makes its absence an error.
const EnvIO = "PSIFLOW_IO"

// ReaderOptions configure a Reader. The zero value is usable: automatic
// backend, queue depth 32, no registered buffers, buffered I/O, no fadvise.
type ReaderOptions struct {
	// Backend forces a backend; "" picks io_uring when available, else pread.
	// The environment variable PSIFLOW_IO overrides an empty Backend.
	Backend Backend
	// QueueDepth is the most reads in flight on this reader (default 32).
	QueueDepth int
	// Batch is how many prepared reads trigger a submission before Reap is
	// called (default QueueDepth: one io_uring_enter per full queue).
	Batch int
	// Buffers, when set, has its Regions registered with the ring once, so
	// reads into them use READ_FIXED.
	Buffers BufferProvider
	// RegisterFiles registers each opened file with the ring (a fixed-file slot)
	// and reads through the slot.
	RegisterFiles bool
	// Direct opens files with O_DIRECT (Linux). Reads whose offset, address or
	// capacity are not aligned to [Align] go through a buffered descriptor of
	// the same file instead. File systems that refuse O_DIRECT (tmpfs) read buffered.
	Direct bool
	// DropCache advises the kernel to drop the page cache of [0, end read)
	// when a File is closed, and every DropEvery bytes of progress while reading.
	DropCache bool
	// DropEvery is the progress between fadvise calls on large files (default 64 MiB).
	DropEvery int64
	// Logger receives the one-time fallback notice (default slog.Default()).
	Logger *slog.Logger
	// Observer, when set, is told of every completed read (bytes, latency, error).
	Observer ReadObserver
	// Faults, when set, injects faults at the system-call seam (tests only).
	Faults FaultInjector
	// SeparateCalls makes file datasets open, stat, read and close each file
	// with calls of their own even where the io_uring reader can chain them
	// into one submission (see [Status.Chain]); for comparisons.
	SeparateCalls bool
	// KernelWait makes the io_uring reader wait for completions blocked in
	// io_uring_enter, as it did before it waited on an eventfd in Go's
	// network poller (the default where the kernel has IORING_REGISTER_EVENTFD
	// and IORING_CQ_EVENTFD_DISABLED, Linux ≥ 5.8); for comparisons.
	KernelWait bool
}

func (o *ReaderOptions) defaults() {
	if o.QueueDepth <= 0 {
		o.QueueDepth = 32
	}
	if o.Batch <= 0 || o.Batch > o.QueueDepth {
		o.Batch = o.QueueDepth
	}
	if o.DropEvery <= 0 {
		o.DropEvery = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Request is one read: len(Buf) bytes of File at Off. Under O_DIRECT, Buf's
// capacity should reach len(Buf) rounded up to [Align] (buffers from [Pool] do).
type Request struct {
	File *File
	Off  int64
	Buf  []byte
	// Permit, when set, is released when the read completes (the gate's second phase).
	Permit Gate
	// Tag is the caller's; it comes back in the Completion.
	Tag any

	// whole, when File is nil, names a whole file to be read by its path
	// into Buf from offset 0 (the io_uring reader chains its open, read and
	// close into one submission).
	whole *wholeFile
}

// wholeFile is a file the reader opens, reads whole and closes itself: what
// the dataset learnt of it at admission (one stat by path).
type wholeFile struct {
	path string
	id   fileID
	size int64
}

// chainLimit is the largest file read through a chained open, read and
// close: larger files are read on a descriptor of their own, in pieces.
const chainLimit = preadChunk

// Completion is a finished read. N < len(Buf) with a nil Err means end of file.
type Completion struct {
	Request
	N   int
	Err error

	// via says how a whole-file request was read; "" for other requests.
	via readVia
	// why says why a chained read was finished on a descriptor of its own.
	why string
}

// readVia is how a whole-file request was read.
type readVia uint8

const (
	viaNone     readVia = iota
	viaChain            // one chained submission: open linked to read
	viaFallback         // chained, then finished on a descriptor of its own (Completion.why)
	viaSeparate         // on a descriptor of its own from the start (the reader cannot chain)
)

// ReadError is a failed read: it names the file and the offset (Off < 0
// when no byte offset is known, as inside an Arrow IPC record batch).
type ReadError struct {
	Path string
	Off  int64
	Op   string
	Err  error
}

func (e *ReadError) Error() string {
	if e.Off < 0 {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Path, e.Err)
	}
	return fmt.Sprintf("%s %s at offset %d: %v", e.Op, e.Path, e.Off, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// Reader reads files into caller-provided buffers: Submit queues reads, Reap
// collects completions (in any order). A Reader is used by one goroutine at a
// time; use one Reader per worker (each io_uring reader owns a ring, and a
// ring completes cached reads on the core that submits them).
type Reader interface {
	// Open opens path for reading through this reader.
	Open(path string) (*File, error)
	// Submit queues one read. When QueueDepth reads are in flight it first
	// reaps at least one completion into an internal backlog (returned by the next Reap).
	Submit(req Request) error
	// Reap moves up to len(out) completions into out, waiting until at least
	// min(wait, in flight) are available, or until ctx ends (then it returns
	// ctx's cause; the reads stay in flight until Close).
	Reap(ctx context.Context, out []Completion, wait int) (int, error)
	// InFlight returns the number of submitted reads not yet reaped.
	InFlight() int
	// Backend names the implementation.
	Backend() Backend
	// Close releases the reader. Reads the kernel has started are cancelled
	// where the kernel can and waited for (their buffers may be reused once
	// Close returns); queued reads that have not started are dropped. Every
	// permit is released.
	Close() error
}

// File is a file opened through a Reader. Close it through File.Close.
type File struct {
	// Path is the name the file was opened with.
	Path string
	// Size is the file's size at open.
	Size int64

	f        *os.File // primary descriptor (O_DIRECT when direct)
	buffered *os.File // lazily opened buffered descriptor for unaligned reads under O_DIRECT
	id       fileID   // device and inode at open
	remote   bool     // on a network or user-space file system (remoteFS)
	direct   bool
	slot     int // registered-file slot, -1 when none
	end      int64
	dropped  int64
	opts     *ReaderOptions
	onClose  func(*File)
}

// Direct reports whether the file is read with O_DIRECT.
func (f *File) Direct() bool { return f.direct }

// Close drops the consumed range from the page cache when DropCache is set,
// then closes the descriptors.
func (f *File) Close() error {
	if f.f == nil {
		return nil
	}
	if f.onClose != nil {
		f.onClose(f)
	}
	if f.opts.DropCache && !f.direct && f.end > 0 {
		fadviseDontNeed(f.f, 0, f.end)
	}
	err := f.f.Close()
	if f.buffered != nil {
		if e := f.buffered.Close(); err == nil {
			err = e
		}
	}
	f.f, f.buffered = nil, nil
	if err != nil {
		return fmt.Errorf("close %s: %w", f.Path, err)
	}
	return nil
}

// advance records progress and drops the cache every DropEvery bytes.
func (f *File) advance(end int64) {
	if end > f.end {
		f.end = end
	}
	if f.opts.DropCache && !f.direct && f.end-f.dropped >= f.opts.DropEvery {
		fadviseDontNeed(f.f, 0, f.end)
		f.dropped = f.end
	}
}

// descriptorFor picks the descriptor for a request and the length to read:
// aligned O_DIRECT reads round the length up to Align within the buffer's capacity.
func (f *File) descriptorFor(off int64, buf []byte) (*os.File, []byte, error) {
	if !f.direct {
		return f.f, buf, nil
	}
	n := roundUp(len(buf), Align)
	if off%Align == 0 && n <= cap(buf) && (len(buf) == 0 || addrAligned(buf)) {
		return f.f, buf[:n], nil
	}
	if f.buffered == nil {
		o, err := openRegular(f.Path, false, f.opts.Faults)
		if err != nil {
			return nil, nil, err
		}
		if o.id != f.id {
			o.f.Close()
			return nil, nil, &ReadError{Op: "open", Path: f.Path, Off: off, Err: ErrChanged}
		}
		f.buffered = o.f
	}
	return f.buffered, buf, nil
}

// Status is the outcome of the io_uring probe: which backend an automatic
// Reader uses here, and why io_uring is not used when it is not.
type Status struct {
	Backend Backend
	// Reason says why io_uring is not used; empty when it is.
	Reason string
	// Forced is true when PSIFLOW_IO chose the backend.
	Forced bool
	// Err is set when PSIFLOW_IO holds a value that names no backend;
	// NewReader then fails with it instead of guessing.
	Err error
	// Chain is true when file datasets read each whole small file (up to
	// 4 MiB) with one chained io_uring submission: open into a direct
	// descriptor linked to the read, instead of open, fstat, read and close
	// system calls. ChainReason says why not when it is false.
	Chain       bool
	ChainReason string
}

// SmallFiles describes how file datasets read small files here, for logs
// and `psiflow doctor`.
func (s Status) SmallFiles() string {
	if s.Chain {
		return "small files chained (open and read linked in one io_uring submission)"
	}
	return "small files read with separate open, read and close calls: " + s.ChainReason
}

// uringReason probes io_uring once per process; "" means usable.
var uringReason = sync.OnceValue(uringUnavailable)

// chainReason probes once per process whether an io_uring ring chains an
// open into a direct descriptor, a read and a close; "" means it does.
var chainReason = sync.OnceValue(chainUnavailable)

var (
	statusOnce  sync.Once
	status      Status
	fallbackLog sync.Once
)

// IOStatus probes io_uring once per process (creating and probing a small
// ring) and reports the backend automatic Readers use. `psiflow doctor` shows it.
func IOStatus() Status {
	statusOnce.Do(func() { status = probeStatus() })
	return status
}

func probeStatus() Status {
	st := probeBackend()
	if st.Backend != BackendURing || st.Reason != "" {
		st.ChainReason = "the " + string(BackendPread) + " backend reads through descriptors"
		return st
	}
	st.ChainReason = chainReason()
	st.Chain = st.ChainReason == ""
	return st
}

func probeBackend() Status {
	switch env := Backend(os.Getenv(EnvIO)); env {
	case BackendPread:
		return Status{Backend: BackendPread, Reason: EnvIO + "=pread", Forced: true}
	case BackendURing:
		if reason := uringReason(); reason != "" {
			return Status{Backend: BackendURing, Reason: reason, Forced: true}
		}
		return Status{Backend: BackendURing, Forced: true}
	case "":
	default:
		err := fmt.Errorf("source: %s=%q: want %q or %q (or unset for automatic)", EnvIO, env, BackendURing, BackendPread)
		return Status{Backend: BackendPread, Reason: err.Error(), Forced: true, Err: err}
	}
	if reason := uringReason(); reason != "" {
		return Status{Backend: BackendPread, Reason: reason}
	}
	return Status{Backend: BackendURing}
}

// NewReader returns a Reader with the backend the options and environment ask
// for. With no preference it uses io_uring when the probe succeeds and pread
// otherwise, logging the reason once per process.
func NewReader(opts ReaderOptions) (Reader, error) {
	opts.defaults()
	want := opts.Backend
	st := IOStatus()
	if want == "" && st.Err != nil {
		return nil, st.Err
	}
	if want == "" {
		want = st.Backend
		if st.Reason != "" && want == BackendPread && !st.Forced {
			fallbackLog.Do(func() {
				opts.Logger.Warn("psiflow: io_uring unavailable, reading with pread", "reason", st.Reason)
			})
		}
	}
	var r Reader
	switch want {
	case BackendPread:
		r = newPreadReader(opts)
	case BackendURing:
		if reason := uringReason(); reason != "" {
			return nil, fmt.Errorf("source: io_uring reader requested but unavailable: %s", reason)
		}
		ur, err := newURingReader(opts)
		if err != nil {
			return nil, err
		}
		r = ur
	default:
		return nil, fmt.Errorf("source: unknown reader backend %q (want %q or %q)", want, BackendURing, BackendPread)
	}
	if opts.Observer != nil {
		r = observe(r, opts.Observer)
	}
	return r, nil
}

// Admit runs the first two phases of admission: a permit from g (if any),
// then a buffer of n bytes from p. If the buffer cannot be had, the permit is
// given back. Pass the permit in [Request.Permit] so it is released on completion.
func Admit(ctx context.Context, g Gate, p BufferProvider, n int) (Buffer, error) {
	if g != nil {
		if err := g.Acquire(ctx); err != nil {
			return nil, fmt.Errorf("source: waiting for a read permit: %w", err)
		}
	}
	b, err := p.Alloc(ctx, n)
	if err != nil {
		if g != nil {
			g.Release()
		}
		return nil, err
	}
	return b, nil
}
