//go:build linux

package source

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"
	"unsafe"

	"github.com/psiflow/psiflow/internal/uring"
	"golang.org/x/sys/unix"
)

// fileTableSize is the number of registered-file slots per ring.
const fileTableSize = 256

// waitSlice is how long the reader waits in the kernel before it looks at
// its context again: the bound on how late a cancelled Reap returns.
const waitSlice = 50 * time.Millisecond

// cancelUserData marks the completions of the reader's own cancel requests.
const cancelUserData = 1 << 63

var fixedWarn sync.Once

type pendingRead struct {
	req      Request
	buf      []byte // what is read: req.Buf, or its aligned extension under O_DIRECT
	fd       int32
	fixed    bool // fd is a registered-file slot
	direct   bool
	bufIdx   int // registered buffer index, -1 when none
	done     int
	retries  int
	used     bool
	injected unix.Errno // a fault injected in place of this submission

	// A chained whole-file read (req.whole): open, read.
	pathz     []byte // req.whole.path, NUL-terminated, alive until the open completes
	chainLeft int    // completions of the chain not yet reaped
	res       [2]int32
	via       readVia
	why       string
	own       bool // req.File was opened by the reader (a fallback): it closes it
}

// The stages of a chain, in the bits of the user data above the request id.
const (
	stageOpen = 0
	stageRead = 1
)

// uringReader is a Reader over one io_uring ring.
type uringReader struct {
	opts      ReaderOptions
	ring      *uring.Ring
	notify    *uring.Notifier // waits for completions in Go's poller; nil: in io_uring_enter
	regions   []memRange
	pending   []pendingRead
	free      []uint32
	inflight  int
	backlog   []Completion
	fileTable []int32 // nil until the first registered open or chain
	tableErr  error   // the kernel refused the file table
	freeSlots []int
	chains    bool            // whole-file reads are chained
	noDirect  map[uint64]bool // devices whose file system refused a chained O_DIRECT open
	closed    bool
	cancelled bool // Close cancelled the reads in flight: none is resubmitted
	failed    error
}

type memRange struct{ start, end uintptr }

func newURingReader(opts ReaderOptions) (Reader, error) {
	depth := 1 << bits.Len(uint(opts.QueueDepth-1)) // ring sizes are powers of two
	chains := !opts.SeparateCalls && chainReason() == ""
	if chains {
		depth *= 2 // two entries per chained read
	}
	// Waiting in the poller needs the kernel to run each completion's task
	// work when it arrives (a signal to the submitting thread), not when that
	// thread next enters the kernel (cooperative task running): a Go thread
	// may sleep in the scheduler while its goroutine waits on another.
	flags := uring.SetupClamp
	if opts.KernelWait {
		flags |= uring.SetupCoopTaskrun
	}
	ring, err := uring.New(uint32(depth), flags)
	if err != nil {
		return nil, fmt.Errorf("source: io_uring reader: %w", err)
	}
	r := &uringReader{opts: opts, ring: ring, pending: make([]pendingRead, opts.QueueDepth)}
	if !opts.KernelWait {
		// Without a notifier (Linux < 5.8) the reader waits in io_uring_enter.
		r.notify, _ = ring.NewNotifier()
	}
	if sq, _ := ring.Entries(); chains && sq >= 2 {
		r.chains = r.table() == nil
	}
	for i := opts.QueueDepth - 1; i >= 0; i-- {
		r.free = append(r.free, uint32(i))
	}
	if opts.Buffers != nil {
		regions := opts.Buffers.Regions()
		if len(regions) > 0 {
			if err := ring.RegisterBuffers(regions); err != nil {
				fixedWarn.Do(func() {
					opts.Logger.Warn("psiflow: io_uring buffer registration failed, reading without fixed buffers", "err", err)
				})
			} else {
				for _, b := range regions {
					s := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
					r.regions = append(r.regions, memRange{s, s + uintptr(len(b))})
				}
			}
		}
	}
	return r, nil
}

func (r *uringReader) Backend() Backend { return BackendURing }

// FixedBuffers reports whether the provider's regions are registered with the ring.
func (r *uringReader) FixedBuffers() bool { return len(r.regions) > 0 }

func (r *uringReader) InFlight() int { return r.inflight }

// UnregisterFixed unregisters the ring's fixed buffers once no read is in flight
// (see [Revocable]); later reads into the same memory are plain reads. It reports
// whether buffers were registered.
func (r *uringReader) UnregisterFixed() (bool, error) {
	if len(r.regions) == 0 || r.closed {
		return false, nil
	}
	if r.inflight > 0 {
		return false, fmt.Errorf("source: unregister fixed buffers with %d reads in flight", r.inflight)
	}
	if err := r.ring.UnregisterBuffers(); err != nil {
		return false, fmt.Errorf("source: %w", err)
	}
	r.regions = nil
	return true, nil
}

func (r *uringReader) Open(path string) (*File, error) {
	if r.closed {
		return nil, ErrClosed
	}
	f, err := openFile(path, &r.opts)
	if err != nil || !r.opts.RegisterFiles {
		return f, err
	}
	if err := r.table(); err != nil {
		return f, nil // registration refused: read through plain descriptors
	}
	if n := len(r.freeSlots); n > 0 {
		slot := r.freeSlots[n-1]
		if err := r.ring.UpdateFiles(uint32(slot), []int32{int32(f.f.Fd())}); err == nil {
			r.freeSlots = r.freeSlots[:n-1]
			f.slot = slot
			f.onClose = r.releaseSlot
		}
	}
	return f, nil
}

// table registers the ring's file table once: fileTableSize slots for
// [ReaderOptions.RegisterFiles], then one per request for chained reads
// (request id + fileTableSize), all empty.
func (r *uringReader) table() error {
	if r.fileTable != nil || r.tableErr != nil {
		return r.tableErr
	}
	t := make([]int32, fileTableSize+len(r.pending))
	for i := range t {
		t[i] = -1
	}
	if err := r.ring.RegisterFiles(t); err != nil {
		r.tableErr = err
		return err
	}
	r.fileTable = t
	for i := range fileTableSize {
		r.freeSlots = append(r.freeSlots, fileTableSize-1-i)
	}
	return nil
}

func (r *uringReader) releaseSlot(f *File) {
	if f.slot < 0 || r.ring == nil {
		return
	}
	_ = r.ring.UpdateFiles(uint32(f.slot), []int32{-1})
	r.freeSlots = append(r.freeSlots, f.slot)
	f.slot = -1
}

func (r *uringReader) bufIndex(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	e := s + uintptr(len(b))
	for i, m := range r.regions {
		if s >= m.start && e <= m.end {
			return i
		}
	}
	return -1
}

func (r *uringReader) Submit(req Request) error {
	if r.closed {
		return ErrClosed
	}
	if r.failed != nil {
		return r.failed
	}
	if req.File == nil && req.whole != nil {
		return r.submitWhole(req)
	}
	if req.File == nil || req.File.f == nil {
		return errors.New("source: submit on a nil or closed file")
	}
	fh, buf, err := req.File.descriptorFor(req.Off, req.Buf)
	if err != nil {
		return err
	}
	for len(r.free) == 0 {
		// Only reads of this reader are waited for: they end on their own.
		if err := r.wait(context.Background(), 1); err != nil {
			return err
		}
	}
	id := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	p := &r.pending[id]
	*p = pendingRead{req: req, buf: buf, fd: int32(fh.Fd()), direct: fh == req.File.f && req.File.direct, bufIdx: r.bufIndex(buf), used: true}
	if fh == req.File.f && req.File.slot >= 0 {
		p.fd, p.fixed = int32(req.File.slot), true
	}
	r.inflight++
	r.prep(id)
	if int(r.ring.Pending()) >= r.opts.Batch {
		if _, err := r.ring.Submit(0); err != nil {
			return r.fail(err)
		}
	}
	return nil
}

func (r *uringReader) prep(id uint32) {
	p := &r.pending[id]
	e := r.ring.SQE()
	for e == nil { // cannot happen while in-flight ≤ ring size; flush defensively
		if _, err := r.ring.Submit(0); err != nil {
			r.fail(err)
			return
		}
		e = r.ring.SQE()
	}
	rest := p.buf[p.done:]
	off := uint64(p.req.Off) + uint64(p.done)
	if r.opts.Faults != nil {
		n, errno := r.opts.fault(p.req.File.Path, int64(off), len(rest), p.direct)
		if errno != 0 {
			// The read fails without reaching the file: a NOP completes in its place.
			p.injected = errno
			e.PrepNop()
			e.UserData = uint64(id)
			return
		}
		rest = rest[:n]
	}
	if p.bufIdx >= 0 {
		e.PrepReadFixed(p.fd, rest, off, uint16(p.bufIdx))
	} else {
		e.PrepRead(p.fd, rest, off)
	}
	if p.fixed {
		e.Flags |= uring.SQEFixedFile
	}
	if p.req.File.remote {
		e.Flags |= uring.SQEAsync // never block the submitting thread on storage that may not answer
	}
	e.UserData = uint64(id)
}

func (r *uringReader) fail(err error) error {
	if r.failed == nil {
		r.failed = fmt.Errorf("source: io_uring reader: %w", err)
	}
	return r.failed
}

// wait submits what is prepared and blocks until at least n completions are
// moved to the backlog (or nothing is in flight), or ctx ends. It first
// submits without waiting (cached reads complete inline) and reaps, and
// waits only when that is not enough, in slices of waitSlice so that a
// cancelled ctx is seen while reads are in flight: parked in Go's poller on
// the ring's eventfd, the completions then reaped from the shared ring
// without a system call, or, without a notifier or with
// [ReaderOptions.KernelWait], blocked in io_uring_enter.
func (r *uringReader) wait(ctx context.Context, n int) error {
	for {
		if _, err := r.ring.Submit(0); err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EBUSY) {
			return r.fail(err)
		}
		r.drain()
		if len(r.backlog) >= n || r.inflight == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if r.notify != nil {
			r.notify.Arm()
			r.drain() // a completion posted before Arm signalled nothing
			if len(r.backlog) >= n || r.inflight == 0 {
				r.notify.Disarm()
				return nil
			}
			err := r.notify.Wait(waitSlice)
			r.notify.Disarm()
			if err != nil && !errors.Is(err, uring.ErrTimeout) {
				return r.fail(err)
			}
			continue
		}
		if _, err := r.ring.SubmitWait(1, waitSlice); err != nil {
			if errors.Is(err, uring.ErrTimeout) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY) {
				continue // look at ctx; or completions must be reaped first: drain does that
			}
			return r.fail(err)
		}
	}
}

// drain processes every ready completion: finished reads go to the backlog,
// short reads and EINTR/EAGAIN are resubmitted.
func (r *uringReader) drain() {
	for {
		c, ok := r.ring.PeekCQE()
		if !ok {
			return
		}
		r.ring.CQESeen()
		id, stage := uint32(c.UserData), c.UserData>>32
		if c.UserData&cancelUserData != 0 || id >= uint32(len(r.pending)) || !r.pending[id].used {
			continue // a cancel request's own completion
		}
		p := &r.pending[id]
		if p.chainLeft > 0 {
			r.chainCompletion(id, stage, c.Res)
			continue
		}
		if p.injected != 0 {
			c.Res, p.injected = -int32(p.injected), 0
		}
		switch {
		case c.Res < 0:
			errno := unix.Errno(-c.Res)
			if (errno == unix.EINTR || errno == unix.EAGAIN) && p.retries < maxRetries && !r.cancelled {
				p.retries++
				r.prep(id)
				continue
			}
			r.complete(id, &ReadError{Op: "read", Path: p.path(), Off: p.req.Off + int64(p.done), Err: errno})
		case c.Res == 0:
			r.complete(id, nil) // end of file
		default:
			p.done += int(c.Res)
			if p.done < len(p.buf) && !(p.direct && p.done%Align != 0) && p.done < len(p.req.Buf) && !r.cancelled {
				r.prep(id) // short read: read the rest
				continue
			}
			r.complete(id, nil)
		}
	}
}

func (r *uringReader) complete(id uint32, err error) {
	p := &r.pending[id]
	c := Completion{Request: p.req, N: min(p.done, len(p.req.Buf)), Err: err, via: p.via, why: p.why}
	if err == nil && p.req.File != nil {
		p.req.File.advance(p.req.Off + int64(c.N))
	}
	if p.own {
		if cerr := p.req.File.Close(); cerr != nil && c.Err == nil {
			c.Err = cerr
		}
		c.File = nil
	}
	if p.req.Permit != nil {
		p.req.Permit.Release()
	}
	*p = pendingRead{}
	r.free = append(r.free, id)
	r.inflight--
	r.backlog = append(r.backlog, c)
}

func (r *uringReader) Reap(ctx context.Context, out []Completion, wait int) (int, error) {
	if r.failed != nil {
		return 0, r.failed
	}
	want := min(wait, len(out))
	if len(r.backlog) < want && r.inflight > 0 {
		if err := r.wait(ctx, want); err != nil {
			return 0, err
		}
	} else {
		if _, err := r.ring.Submit(0); err != nil {
			return 0, r.fail(err)
		}
		r.drain()
	}
	n := copy(out, r.backlog)
	rest := copy(r.backlog, r.backlog[n:])
	clear(r.backlog[rest:])
	r.backlog = r.backlog[:rest]
	return n, nil
}

// Close cancels the reads in flight (IORING_OP_ASYNC_CANCEL), waits until
// the kernel has finished with each, cancelled or not, then closes the ring.
// Their buffers may be reused once Close returns. A read the kernel cannot
// interrupt (storage that does not answer) keeps Close waiting for it.
func (r *uringReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.Cancel()
	for r.inflight > 0 && r.failed == nil {
		r.wait(context.Background(), r.inflight)
		clear(r.backlog)
		r.backlog = r.backlog[:0]
	}
	err := r.ring.Close()
	r.ring = nil
	if r.notify != nil {
		err = errors.Join(err, r.notify.Close())
		r.notify = nil
	}
	if err != nil {
		return fmt.Errorf("source: closing io_uring reader: %w", err)
	}
	return nil
}

// Cancel asks the kernel to cancel every read in flight; they complete
// through Reap (cancelled, or as far as they got).
func (r *uringReader) Cancel() bool {
	if r.inflight > 0 && r.failed == nil && !r.cancelled {
		r.cancelAll()
	}
	return r.cancelled && r.failed == nil
}

// cancelAll asks the kernel to cancel every read in flight; from then on no
// read is resubmitted (a cancelled or short read completes as it stands).
func (r *uringReader) cancelAll() {
	r.cancelled = true
	for id := range r.pending {
		if !r.pending[id].used {
			continue
		}
		e := r.ring.SQE()
		if e == nil {
			if _, err := r.ring.Submit(0); err != nil {
				r.fail(err)
				return
			}
			if e = r.ring.SQE(); e == nil {
				return
			}
		}
		e.PrepCancel(uint64(id))
		e.UserData = cancelUserData
		if r.pending[id].chainLeft > 0 {
			// The open may be done: cancel the read too.
			if e = r.ring.SQE(); e != nil {
				e.PrepCancel(uint64(id) | stageRead<<32)
				e.UserData = cancelUserData
			}
		}
	}
	if _, err := r.ring.Submit(0); err != nil {
		r.fail(err)
	}
}
