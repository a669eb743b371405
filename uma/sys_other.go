//go:build !linux

package uma

import "os"

// supported reports whether this platform has the memory system calls UMA needs.
const supported = false

type otherKernel struct{}

func defaultKernel() kernel { return otherKernel{} }

func (otherKernel) mmap(int) ([]byte, error)     { return nil, errUnsupported }
func (otherKernel) munmap([]byte) error          { return errUnsupported }
func (otherKernel) madvise([]byte, advice) error { return errUnsupported }
func (otherKernel) mlock([]byte) error           { return errUnsupported }
func (otherKernel) munlock([]byte) error         { return errUnsupported }
func (otherKernel) mincore([]byte, []byte) error { return errUnsupported }
func (otherKernel) pageSize() int                { return os.Getpagesize() }

func hostMemory() (int64, error) { return 0, errUnsupported }
