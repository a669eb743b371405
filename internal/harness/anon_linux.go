//go:build linux

package harness

import "golang.org/x/sys/unix"

// anonMemory maps n bytes of private anonymous memory, untouched (nothing is charged
// until a page is written).
func anonMemory(n int64) ([]byte, func(), error) {
	m, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, err
	}
	return m, func() { _ = unix.Munmap(m) }, nil
}

// releasePages gives pages [from, to) of mem back to the kernel at once
// (MADV_DONTNEED: the cgroup is uncharged before the call returns).
func releasePages(mem []byte, from, to int64) error {
	if from >= to {
		return nil
	}
	return unix.Madvise(mem[from*pageSize:to*pageSize], unix.MADV_DONTNEED)
}
