//go:build linux

package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsupported is returned on systems without io_uring.
var ErrUnsupported = errors.New("uring: io_uring is only available on Linux")

// Opcodes used by psiflow (include/uapi/linux/io_uring.h).
const (
	OpNop         uint8 = 0
	OpReadv       uint8 = 1
	OpReadFixed   uint8 = 4
	OpAsyncCancel uint8 = 14
	OpOpenat      uint8 = 18
	OpClose       uint8 = 19
	OpRead        uint8 = 22
)

// ATFDCWD is AT_FDCWD: a relative path of [SQE.PrepOpenatDirect] is
// resolved from the working directory.
const ATFDCWD int32 = -100

// Setup flags.
const (
	SetupClamp       uint32 = 1 << 4
	SetupSubmitAll   uint32 = 1 << 7
	SetupCoopTaskrun uint32 = 1 << 8
)

// Feature bits reported by io_uring_setup.
const (
	FeatSingleMmap uint32 = 1 << 0
	FeatNoDrop     uint32 = 1 << 1
	// FeatExtArg: io_uring_enter takes a timeout (Linux 5.11), which
	// [Ring.SubmitWait] needs.
	FeatExtArg uint32 = 1 << 8
)

// SQE flags.
const (
	SQEFixedFile uint8 = 1 << 0
	// SQEIOLink links the entry to the next: the next starts only once
	// this one has completed successfully, and is cancelled (-ECANCELED)
	// when it fails.
	SQEIOLink uint8 = 1 << 2
	// SQEIOHardlink links like SQEIOLink, but the next entry runs even when
	// this one fails or is short (a read shorter than asked breaks an
	// SQEIOLink chain): the close after a read.
	SQEIOHardlink uint8 = 1 << 3
	// SQEAsync makes the kernel issue the request from its worker threads
	// instead of trying it first on the submitting thread.
	SQEAsync uint8 = 1 << 4
)

const (
	offSQRing uint64 = 0
	offCQRing uint64 = 0x8000000
	offSQEs   uint64 = 0x10000000

	enterGetEvents uint32 = 1 << 0
	enterExtArg    uint32 = 1 << 3

	regBuffers     = 0
	unregBuffers   = 1
	regFiles       = 2
	unregFiles     = 3
	regFilesUpdate = 6
	regProbe       = 8

	opSupported = 1 << 0
)

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// SQE is one submission queue entry (struct io_uring_sqe, 64 bytes).
type SQE struct {
	Opcode      uint8
	Flags       uint8
	IOPrio      uint16
	FD          int32
	Off         uint64
	Addr        uint64
	Len         uint32
	OpFlags     uint32
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	SpliceFDIn  int32
	Addr3       uint64
	pad         uint64
}

// CQE is one completion queue entry (struct io_uring_cqe, 16 bytes).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

var (
	_ [64 - unsafe.Sizeof(SQE{})]byte
	_ [unsafe.Sizeof(SQE{}) - 64]byte
	_ [16 - unsafe.Sizeof(CQE{})]byte
	_ [120 - unsafe.Sizeof(params{})]byte
	_ [unsafe.Sizeof(params{}) - 120]byte
)

// Ring is one io_uring instance with its mapped queues. It is not safe for concurrent use.
type Ring struct {
	fd       int
	features uint32
	sqMem    []byte
	cqMem    []byte
	sqeMem   []byte

	sqHead, sqTail, sqFlags *uint32
	sqMask, sqEntries       uint32
	sqes                    unsafe.Pointer
	sqeTail                 uint32 // local tail: prepared, not yet published

	cqHead, cqTail *uint32
	cqFlags        *uint32 // nil when the kernel has no completion flags (Linux < 5.8)
	cqMask         uint32
	cqes           unsafe.Pointer
	cqEntries      uint32

	// The timed wait's arguments live here, off the goroutine's stack, while the kernel reads them.
	waitTS  unix.Timespec
	waitArg getEventsArg
}

// New creates a ring with at least entries submission slots. flags are
// io_uring_setup flags; flags the kernel rejects with EINVAL are retried
// without the optional ones (SetupCoopTaskrun, SetupSubmitAll).
func New(entries uint32, flags uint32) (*Ring, error) {
	var p params
	p.flags = flags
	fd, err := setup(entries, &p)
	if errors.Is(err, unix.EINVAL) && flags&(SetupCoopTaskrun|SetupSubmitAll) != 0 {
		p = params{flags: flags &^ (SetupCoopTaskrun | SetupSubmitAll)}
		fd, err = setup(entries, &p)
	}
	if err != nil {
		return nil, fmt.Errorf("uring: io_uring_setup(%d): %w", entries, err)
	}
	r := &Ring{fd: fd, features: p.features}
	if err := r.mapRings(&p); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return r, nil
}

func setup(entries uint32, p *params) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

func (r *Ring) mapRings(p *params) error {
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(CQE{})))
	single := p.features&FeatSingleMmap != 0
	if single && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, int64(offSQRing), sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("uring: mmap submission ring: %w", err)
	}
	if single {
		r.cqMem = r.sqMem
	} else {
		r.cqMem, err = unix.Mmap(r.fd, int64(offCQRing), cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			r.unmap()
			return fmt.Errorf("uring: mmap completion ring: %w", err)
		}
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(SQE{}))
	r.sqeMem, err = unix.Mmap(r.fd, int64(offSQEs), sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.unmap()
		return fmt.Errorf("uring: mmap submission entries: %w", err)
	}
	sq := unsafe.Pointer(&r.sqMem[0])
	cq := unsafe.Pointer(&r.cqMem[0])
	r.sqHead = (*uint32)(unsafe.Add(sq, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.sqOff.tail))
	r.sqFlags = (*uint32)(unsafe.Add(sq, p.sqOff.flags))
	r.sqMask = *(*uint32)(unsafe.Add(sq, p.sqOff.ringMask))
	r.sqEntries = *(*uint32)(unsafe.Add(sq, p.sqOff.ringEntries))
	array := unsafe.Add(sq, p.sqOff.array)
	for i := uint32(0); i < r.sqEntries; i++ { // identity mapping, set once
		*(*uint32)(unsafe.Add(array, 4*i)) = i
	}
	r.sqes = unsafe.Pointer(&r.sqeMem[0])
	r.sqeTail = atomic.LoadUint32(r.sqTail)
	r.cqHead = (*uint32)(unsafe.Add(cq, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.cqOff.tail))
	if p.cqOff.flags != 0 {
		r.cqFlags = (*uint32)(unsafe.Add(cq, p.cqOff.flags))
	}
	r.cqMask = *(*uint32)(unsafe.Add(cq, p.cqOff.ringMask))
	r.cqEntries = *(*uint32)(unsafe.Add(cq, p.cqOff.ringEntries))
	r.cqes = unsafe.Add(cq, p.cqOff.cqes)
	return nil
}

func (r *Ring) unmap() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
		r.sqeMem = nil
	}
	if r.cqMem != nil && (len(r.sqMem) == 0 || &r.cqMem[0] != &r.sqMem[0]) {
		unix.Munmap(r.cqMem)
	}
	r.cqMem = nil
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
		r.sqMem = nil
	}
}

// Close unmaps the queues and closes the ring. Reads still in flight are
// cancelled by the kernel; their buffers must not be reused before Close returns.
func (r *Ring) Close() error {
	if r.fd < 0 {
		return nil
	}
	r.unmap()
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// FD returns the ring's file descriptor.
func (r *Ring) FD() int { return r.fd }

// Features returns the IORING_FEAT_* bits the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// Entries returns the submission and completion queue sizes.
func (r *Ring) Entries() (sq, cq uint32) { return r.sqEntries, r.cqEntries }

// SQE returns the next free submission entry, zeroed, or nil when the
// submission queue is full (submit first).
func (r *Ring) SQE() *SQE {
	head := atomic.LoadUint32(r.sqHead)
	if r.sqeTail-head >= r.sqEntries {
		return nil
	}
	e := (*SQE)(unsafe.Add(r.sqes, uintptr(r.sqeTail&r.sqMask)*unsafe.Sizeof(SQE{})))
	*e = SQE{}
	r.sqeTail++
	return e
}

// Pending returns how many prepared entries have not yet been submitted.
func (r *Ring) Pending() uint32 { return r.sqeTail - atomic.LoadUint32(r.sqHead) }

// Space returns how many entries [Ring.SQE] can hand out before a submission:
// a linked chain must be prepared whole, or its links would be cut.
func (r *Ring) Space() uint32 { return r.sqEntries - (r.sqeTail - atomic.LoadUint32(r.sqHead)) }

// RawSubmitMax is the largest batch Submit(0) hands to the kernel as a raw system call.
const RawSubmitMax = 4

// Submit publishes the prepared entries and enters the kernel once, waiting
// for at least waitFor completions when waitFor > 0. It returns the number of
// entries the kernel consumed. EINTR is retried.
//
// Without waiting, io_uring_enter does not block: the kernel completes
// cached reads inline (copying on this thread) and queues everything else.
// Such calls submitting at most RawSubmitMax entries are made as raw system
// calls, so the Go scheduler does not hand this goroutine's P to another
// thread while the kernel copies (under CPU contention that handoff costs a
// sleep and a wake-up per call). Larger batches, whose inline copies could
// keep a garbage-collection stop-the-world spinning, and calls that wait are
// ordinary (blocking-aware) system calls.
func (r *Ring) Submit(waitFor uint32) (int, error) {
	atomic.StoreUint32(r.sqTail, r.sqeTail)
	toSubmit := r.sqeTail - atomic.LoadUint32(r.sqHead)
	var flags uint32
	if waitFor > 0 {
		flags |= enterGetEvents
	}
	if toSubmit == 0 && waitFor == 0 {
		return 0, nil
	}
	for {
		var n uintptr
		var errno unix.Errno
		if waitFor > 0 || toSubmit > RawSubmitMax {
			n, _, errno = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(waitFor), uintptr(flags), 0, 0)
		} else {
			n, _, errno = unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), 0, 0, 0, 0)
		}
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			// A signal arrived: entries may have been consumed; recount and retry.
			toSubmit = r.sqeTail - atomic.LoadUint32(r.sqHead)
			continue
		default:
			return int(n), fmt.Errorf("uring: io_uring_enter(submit %d, wait %d): %w", toSubmit, waitFor, errno)
		}
	}
}

// ErrTimeout is returned by [Ring.SubmitWait] when the timeout passed
// before the completions waited for arrived.
var ErrTimeout = errors.New("uring: wait timed out")

// getEventsArg is struct io_uring_getevents_arg.
type getEventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	minWait   uint32
	ts        uint64
}

// SubmitWait publishes the prepared entries and waits for at least waitFor
// completions, or until timeout has passed: then it returns [ErrTimeout]
// (entries prepared before the call are submitted either way). A caller that
// must stay cancellable waits in slices of a timeout and checks its context
// in between. It needs [FeatExtArg] (Linux 5.11); without it, it returns
// [ErrUnsupported]. EINTR is retried with the remaining time.
func (r *Ring) SubmitWait(waitFor uint32, timeout time.Duration) (int, error) {
	if r.features&FeatExtArg == 0 {
		return 0, fmt.Errorf("uring: timed wait: %w (kernel without IORING_FEAT_EXT_ARG, Linux ≥ 5.11 needed)", ErrUnsupported)
	}
	atomic.StoreUint32(r.sqTail, r.sqeTail)
	deadline := time.Now().Add(timeout)
	submitted := 0
	for {
		toSubmit := r.sqeTail - atomic.LoadUint32(r.sqHead)
		left := max(time.Until(deadline), 0)
		r.waitTS = unix.NsecToTimespec(left.Nanoseconds())
		r.waitArg = getEventsArg{ts: uint64(uintptr(unsafe.Pointer(&r.waitTS)))}
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(waitFor),
			uintptr(enterGetEvents|enterExtArg), uintptr(unsafe.Pointer(&r.waitArg)), unsafe.Sizeof(r.waitArg))
		switch errno {
		case 0:
			// With entries submitted the kernel reports their number even when
			// the wait then timed out: the completions say which it was.
			submitted += int(n)
			if r.CQReady() >= waitFor {
				return submitted, nil
			}
			if !time.Now().Before(deadline) {
				return submitted, ErrTimeout
			}
			continue
		case unix.ETIME:
			return submitted, ErrTimeout
		case unix.EINTR:
			if time.Now().After(deadline) {
				return submitted, ErrTimeout
			}
			continue
		default:
			return submitted + int(n), fmt.Errorf("uring: io_uring_enter(submit %d, wait %d, timeout %v): %w", toSubmit, waitFor, left, errno)
		}
	}
}

// PeekCQE returns the oldest unreaped completion without waiting, or false when there is none.
// Call [Ring.CQESeen] after using it.
func (r *Ring) PeekCQE() (CQE, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return CQE{}, false
	}
	return *(*CQE)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*unsafe.Sizeof(CQE{}))), true
}

// CQESeen marks the oldest completion as consumed, freeing its slot.
func (r *Ring) CQESeen() {
	atomic.StoreUint32(r.cqHead, atomic.LoadUint32(r.cqHead)+1)
}

// CQReady returns the number of completions waiting to be reaped.
func (r *Ring) CQReady() uint32 { return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead) }
