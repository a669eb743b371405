//go:build linux

package uring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// PrepRead fills e for IORING_OP_READ of len(buf) bytes at off. buf must stay alive until completion.
func (e *SQE) PrepRead(fd int32, buf []byte, off uint64) {
	e.Opcode = OpRead
	e.FD = fd
	e.Off = off
	e.Addr = addrOf(buf)
	e.Len = uint32(len(buf))
}

// PrepReadFixed fills e for IORING_OP_READ_FIXED into registered buffer bufIndex;
// buf must lie inside that registered buffer.
func (e *SQE) PrepReadFixed(fd int32, buf []byte, off uint64, bufIndex uint16) {
	e.PrepRead(fd, buf, off)
	e.Opcode = OpReadFixed
	e.BufIndex = bufIndex
}

// PrepReadv fills e for IORING_OP_READV. The iovecs and the memory they point to must
// stay alive until completion.
func (e *SQE) PrepReadv(fd int32, iovs []unix.Iovec, off uint64) {
	e.Opcode = OpReadv
	e.FD = fd
	e.Off = off
	if len(iovs) > 0 {
		e.Addr = uint64(uintptr(unsafe.Pointer(&iovs[0])))
	}
	e.Len = uint32(len(iovs))
}

// PrepCancel fills e for IORING_OP_ASYNC_CANCEL of the request submitted
// with user data target. Its own completion carries 0 (cancelled), -ENOENT
// (no such request: it completed already) or -EALREADY (running: the kernel
// interrupts it where it can, and the request completes on its own).
func (e *SQE) PrepCancel(target uint64) {
	e.Opcode = OpAsyncCancel
	e.FD = -1
	e.Addr = target
}

// PrepOpenatDirect fills e for IORING_OP_OPENAT of the NUL-terminated path
// (relative to dirfd, or [ATFDCWD]) into slot of the ring's registered file
// table (a direct descriptor, Linux 5.15: no descriptor in the process's
// table); flags and mode as for openat(2), without O_CLOEXEC (the kernel
// refuses it for a direct descriptor: EINVAL). path must stay alive until
// completion. Completes with 0 or -errno.
func (e *SQE) PrepOpenatDirect(dirfd int32, path *byte, flags uint32, mode uint32, slot uint32) {
	e.Opcode = OpOpenat
	e.FD = dirfd
	e.Addr = uint64(uintptr(unsafe.Pointer(path)))
	e.OpFlags = flags
	e.Len = mode
	e.SpliceFDIn = int32(slot + 1) // file_index: slot + 1
}

// PrepReadDirect fills e for IORING_OP_READ from the direct descriptor in
// slot of the registered file table.
func (e *SQE) PrepReadDirect(slot uint32, buf []byte, off uint64) {
	e.PrepRead(int32(slot), buf, off)
	e.Flags |= SQEFixedFile
}

// PrepCloseDirect fills e for IORING_OP_CLOSE of the direct descriptor in
// slot (Linux 5.15), freeing the slot.
func (e *SQE) PrepCloseDirect(slot uint32) {
	e.Opcode = OpClose
	e.FD = 0
	e.SpliceFDIn = int32(slot + 1)
}

// PrepNop fills e for IORING_OP_NOP.
func (e *SQE) PrepNop() { e.Opcode = OpNop }

func addrOf(b []byte) uint64 {
	if cap(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}
