//go:build linux

package uring

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

func (r *Ring) register(op uintptr, arg unsafe.Pointer, n int) error {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), op, uintptr(arg), uintptr(n), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

// RegisterBuffers registers bufs as fixed buffers 0..len(bufs)-1. The kernel pins and
// charges the memory (RLIMIT_MEMLOCK without CAP_IPC_LOCK) until UnregisterBuffers or Close.
func (r *Ring) RegisterBuffers(bufs [][]byte) error {
	if len(bufs) == 0 {
		return nil
	}
	iovs := make([]unix.Iovec, len(bufs))
	for i, b := range bufs {
		iovs[i].Base = unsafe.SliceData(b)
		iovs[i].SetLen(len(b))
	}
	if err := r.register(regBuffers, unsafe.Pointer(&iovs[0]), len(iovs)); err != nil {
		return fmt.Errorf("uring: register %d buffers: %w", len(bufs), err)
	}
	return nil
}

// UnregisterBuffers drops the fixed buffers.
func (r *Ring) UnregisterBuffers() error {
	if err := r.register(unregBuffers, nil, 0); err != nil {
		return fmt.Errorf("uring: unregister buffers: %w", err)
	}
	return nil
}

// RegisterFiles registers a table of file descriptors; -1 entries are empty slots
// that [Ring.UpdateFiles] fills later.
func (r *Ring) RegisterFiles(fds []int32) error {
	if len(fds) == 0 {
		return nil
	}
	if err := r.register(regFiles, unsafe.Pointer(&fds[0]), len(fds)); err != nil {
		return fmt.Errorf("uring: register %d files: %w", len(fds), err)
	}
	return nil
}

type filesUpdate struct {
	offset uint32
	resv   uint32
	fds    uint64
}

// UpdateFiles replaces registered file slots starting at off with fds (-1 empties a slot).
func (r *Ring) UpdateFiles(off uint32, fds []int32) error {
	if len(fds) == 0 {
		return nil
	}
	u := filesUpdate{offset: off, fds: uint64(uintptr(unsafe.Pointer(&fds[0])))}
	if err := r.register(regFilesUpdate, unsafe.Pointer(&u), len(fds)); err != nil {
		return fmt.Errorf("uring: update %d file slots at %d: %w", len(fds), off, err)
	}
	return nil
}

// UnregisterFiles drops the registered file table.
func (r *Ring) UnregisterFiles() error {
	if err := r.register(unregFiles, nil, 0); err != nil {
		return fmt.Errorf("uring: unregister files: %w", err)
	}
	return nil
}

// Probe lists the opcodes the running kernel supports.
type Probe struct {
	LastOp    uint8
	supported [256]bool
}

// Supports reports whether op is supported.
func (p *Probe) Supports(op uint8) bool { return p.supported[op] }

// Probe asks the kernel which opcodes this ring supports (IORING_REGISTER_PROBE, 5.6+).
func (r *Ring) Probe() (*Probe, error) {
	const nOps = 256
	// struct io_uring_probe: 16-byte header, then 8 bytes per op.
	buf := make([]byte, 16+8*nOps)
	if err := r.register(regProbe, unsafe.Pointer(&buf[0]), nOps); err != nil {
		return nil, fmt.Errorf("uring: probe: %w", err)
	}
	p := &Probe{LastOp: buf[0]}
	opsLen := int(buf[1])
	for i := 0; i < opsLen && i < nOps; i++ {
		op := buf[16+8*i]
		flags := uint16(buf[16+8*i+2]) | uint16(buf[16+8*i+3])<<8
		if flags&opSupported != 0 {
			p.supported[op] = true
		}
	}
	return p, nil
}
