//go:build linux

package harness

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DropCache drops the page cache of each file: dirty pages are written back first
// (fdatasync), then the whole file is advised away (posix_fadvise POSIX_FADV_DONTNEED
// over [0, end), which also drops large folios; advising only part of a file leaves
// folios that straddle its ends). Pages mapped by a running process stay. The first
// error names the file.
func DropCache(paths []string) error {
	for _, p := range paths {
		if err := dropOne(p); err != nil {
			return err
		}
	}
	return nil
}

func dropOne(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("harness: drop cache: %w", err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := unix.Fdatasync(fd); err != nil {
		return fmt.Errorf("harness: drop cache: fdatasync %s: %w", p, err)
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("harness: drop cache: fadvise %s: %w", p, err)
	}
	return nil
}

// CachedBytes returns how many bytes of the files are in the page cache (mincore over
// a read-only shared mapping of each, counted in pages) and their total size.
func CachedBytes(paths []string) (cached, total int64, err error) {
	page := int64(os.Getpagesize())
	for _, p := range paths {
		c, n, err := cachedOne(p, page)
		if err != nil {
			return cached, total, err
		}
		cached += c
		total += n
	}
	return cached, total, nil
}

func cachedOne(p string, page int64) (cached, size int64, err error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, 0, fmt.Errorf("harness: cached bytes: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("harness: cached bytes: %w", err)
	}
	size = st.Size()
	if size == 0 {
		return 0, 0, nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, size, fmt.Errorf("harness: cached bytes: mmap %s: %w", p, err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, size, fmt.Errorf("harness: cached bytes: mincore %s: %w", p, errno)
	}
	for i, v := range vec {
		if v&1 != 0 {
			cached += min(page, size-int64(i)*page)
		}
	}
	return cached, size, nil
}
