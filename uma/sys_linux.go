//go:build linux

package uma

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// supported reports whether this platform has the memory system calls UMA needs.
const supported = true

type linuxKernel struct{}

func defaultKernel() kernel { return linuxKernel{} }

func (linuxKernel) mmap(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap(MAP_PRIVATE|MAP_ANONYMOUS, %d bytes): %w", n, err)
	}
	return b, nil
}

func (linuxKernel) munmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("munmap(%d bytes): %w", len(b), err)
	}
	return nil
}

func (linuxKernel) madvise(b []byte, a advice) error {
	var adv int
	switch a {
	case adviseFree:
		adv = unix.MADV_FREE
	case adviseDontNeed:
		adv = unix.MADV_DONTNEED
	case advisePageout:
		adv = unix.MADV_PAGEOUT
	case adviseHugePage:
		adv = unix.MADV_HUGEPAGE
	default:
		return fmt.Errorf("madvise: unknown advice %d", a)
	}
	if err := unix.Madvise(b, adv); err != nil {
		return fmt.Errorf("madvise(%s, %d bytes): %w", a, len(b), err)
	}
	return nil
}

func (linuxKernel) mlock(b []byte) error {
	if err := unix.Mlock(b); err != nil {
		return fmt.Errorf("mlock(%d bytes): %w", len(b), err)
	}
	return nil
}

func (linuxKernel) munlock(b []byte) error {
	if err := unix.Munlock(b); err != nil {
		return fmt.Errorf("munlock(%d bytes): %w", len(b), err)
	}
	return nil
}

func (linuxKernel) mincore(b []byte, vec []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return fmt.Errorf("mincore(%d bytes): %w", len(b), e)
	}
	return nil
}

func (linuxKernel) pageSize() int { return os.Getpagesize() }

// hostMemory is the host's physical memory (sysinfo(2) totalram × mem_unit).
func hostMemory() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("sysinfo: %w", err)
	}
	return int64(si.Totalram) * int64(si.Unit), nil
}
