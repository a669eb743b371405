package kerneltest

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

func probe(f Feature) (bool, string) {
	switch f {
	case PSI:
		b, err := os.ReadFile("/proc/pressure/memory")
		if err != nil {
			return false, err.Error()
		}
		if len(b) == 0 {
			return false, "/proc/pressure/memory is empty"
		}
		return true, "/proc/pressure/memory is readable"
	case Cgroups:
		if os.Geteuid() != 0 {
			return false, "not root"
		}
		for _, dir := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
			var st unix.Statfs_t
			if unix.Statfs(dir, &st) != nil {
				continue
			}
			if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
				continue
			}
			if err := unix.Access(dir, unix.W_OK); err != nil {
				return false, fmt.Sprintf("%s is not writable: %v", dir, err)
			}
			return true, "root, with a writable cgroup file system at " + dir
		}
		return false, "no cgroup file system under /sys/fs/cgroup"
	case IOUring:
		if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && len(b) > 0 && b[0] != '0' {
			return false, "kernel.io_uring_disabled is " + string(b[:1])
		}
		// io_uring_setup(1, &params): a ring of one entry, closed at once.
		var params [120]byte
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if errno != 0 {
			return false, "io_uring_setup: " + errno.Error()
		}
		unix.Close(int(fd))
		return true, "io_uring_setup succeeds"
	case Reclaim:
		page := os.Getpagesize()
		b, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return false, "mmap: " + err.Error()
		}
		defer unix.Munmap(b)
		b[0] = 1
		if err := unix.Madvise(b, unix.MADV_PAGEOUT); err != nil {
			return false, "madvise(MADV_PAGEOUT): " + err.Error()
		}
		return true, "madvise(MADV_PAGEOUT) is accepted"
	case FUSE:
		if os.Geteuid() != 0 {
			return false, "not root (tests mount with mount(2), without fusermount)"
		}
		fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, "/dev/fuse: " + err.Error()
		}
		unix.Close(fd)
		b, err := os.ReadFile("/proc/filesystems")
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] == "fuse" {
				return true, "root, /dev/fuse and the fuse file system type"
			}
		}
		return false, "no fuse in /proc/filesystems"
	}
	return false, fmt.Sprintf("unknown feature %q", f)
}
