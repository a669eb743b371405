//go:build unix

package source

import "golang.org/x/sys/unix"

// mapAligned maps n bytes of anonymous, page-aligned memory outside the Go heap.
func mapAligned(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

func unmapAligned(b []byte) { _ = unix.Munmap(b[:cap(b)]) }

// dropPages gives the pages of b back to the kernel (MADV_DONTNEED: the next
// touch reads zeros); b must be a private anonymous mapping's, not pinned.
func dropPages(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }
