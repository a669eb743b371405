//go:build linux

package source

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/psiflow/psiflow/internal/uring"
	"golang.org/x/sys/unix"
)

// directFlag is O_DIRECT where the system has it.
const directFlag = unix.O_DIRECT

// ProbeDirect opens path with O_DIRECT and closes it: nil when the file system
// serves O_DIRECT reads (tmpfs, for one, refuses them with EINVAL; a reader with
// ReaderOptions.Direct then reads its files buffered).
// The open does not block on a named pipe (O_NONBLOCK).
func ProbeDirect(path string) error {
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_DIRECT)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	return unix.Close(fd)
}

// fadviseDontNeed drops [off, off+n) of f from the page cache. Advising the
// whole consumed prefix (not only the last range) is what drops large folios.
func fadviseDontNeed(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}

func addrAligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%Align == 0
}

// uringUnavailable creates and probes a small ring; it returns why io_uring
// cannot serve reads here, or "" when it can.
func uringUnavailable() string {
	r, err := uring.New(4, 0)
	if err != nil {
		return describeSetupError(err)
	}
	defer r.Close()
	p, err := r.Probe()
	if err != nil {
		return fmt.Sprintf("io_uring probe failed (kernel older than 5.6?): %v", err)
	}
	if !p.Supports(uring.OpRead) {
		return "kernel lacks IORING_OP_READ (Linux ≥ 5.6 needed)"
	}
	if !p.Supports(uring.OpAsyncCancel) || r.Features()&uring.FeatExtArg == 0 {
		return "kernel lacks IORING_FEAT_EXT_ARG or IORING_OP_ASYNC_CANCEL (Linux ≥ 5.11 needed to cancel reads in flight)"
	}
	return ""
}

func describeSetupError(err error) string {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return "io_uring_setup: ENOSYS (kernel without io_uring, or a seccomp filter answering ENOSYS)"
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		b, _ := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
		switch strings.TrimSpace(string(b)) {
		case "2":
			return "io_uring disabled by sysctl kernel.io_uring_disabled=2"
		case "1":
			return "sysctl kernel.io_uring_disabled=1 and this process is not in kernel.io_uring_group"
		}
		return fmt.Sprintf("io_uring_setup: %v (blocked by seccomp or an LSM, as Docker's default profile does)", errors.Unwrap(err))
	default:
		return err.Error()
	}
}

// Network and user-space file systems (statfs f_type, include/uapi/linux/magic.h
// and the file systems' own headers): their storage may never answer a read.
var remoteMagics = map[int64]string{
	0x65735546: "fuse",
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x00c36400: "ceph",
	0x01021997: "9p",
	0x5346414f: "afs",
	0x6b414653: "afs",
	0x73757245: "coda",
	0x0bd00bd0: "lustre",
	0x47504653: "gpfs",
	0x19830326: "beegfs",
	0x20030528: "orangefs",
}

// remoteByDev caches remoteFS's answer per device.
var remoteByDev sync.Map // uint64 → bool

// remoteFS reports whether fd's file lives on a network or user-space file
// system. The io_uring reader hands such reads to the kernel's worker threads
// (IOSQE_ASYNC) instead of letting the submitting thread try them first:
// Linux 6.18 issues a FUSE direct-I/O read inline and blocks io_uring_enter
// until the daemon answers, which a stuck daemon never does. The answer is
// cached per device, so one fstatfs is made per file system.
func remoteFS(fd int, dev uint64) bool {
	return remoteDev(dev, func(sfs *unix.Statfs_t) error { return unix.Fstatfs(fd, sfs) })
}

// remoteDev is remoteFS's cached answer for dev, asking statfs (on a
// descriptor or a path) only the first time.
func remoteDev(dev uint64, statfs func(*unix.Statfs_t) error) bool {
	if v, ok := remoteByDev.Load(dev); ok {
		return v.(bool)
	}
	var sfs unix.Statfs_t
	if err := statfs(&sfs); err != nil {
		return true // unknown: the safe side
	}
	_, remote := remoteMagics[int64(sfs.Type)]
	remoteByDev.Store(dev, remote)
	return remote
}

// statWhole stats path for a chained read (open, read and close in one
// io_uring submission): the type, size and identity the open and the read
// then rely on. It returns nil and no error when the file is better read on
// a descriptor of its own: empty, larger than chainLimit, or on a network or
// user-space file system (whose reads the reader hands to the kernel's
// workers, see remoteFS). Anything but a regular file is refused, named.
//
// The type is checked here, by path, not on the descriptor the chain opens:
// the chain opens with O_NONBLOCK, so a named pipe swapped in between
// returns at once and reads nothing (the read is then finished on a
// descriptor of its own, which names it), but a device node swapped in
// between would be read as data, up to the size stat'ed here.
func statWhole(path string) (*wholeFile, error) {
	var st unix.Stat_t
	for {
		err := unix.Stat(path, &st)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return nil, &ReadError{Op: "stat", Path: path, Off: -1, Err: err}
		}
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
		return nil, notRegular(path, modeOf(uint32(st.Mode)))
	}
	if st.Size <= 0 || st.Size > chainLimit || remotePath(path, uint64(st.Dev)) {
		return nil, nil
	}
	return &wholeFile{path: path, id: fileID{uint64(st.Dev), uint64(st.Ino)}, size: st.Size}, nil
}

// remotePath is remoteFS for a path: statfs once per device.
func remotePath(path string, dev uint64) bool {
	return remoteDev(dev, func(sfs *unix.Statfs_t) error { return unix.Statfs(path, sfs) })
}

// chainUnavailable opens "/" into a direct descriptor of a small ring and
// closes it, linked, as the chained reads do: "" when the kernel does it
// (Linux ≥ 5.15), else why not.
func chainUnavailable() string {
	r, err := uring.New(4, 0)
	if err != nil {
		return describeSetupError(err)
	}
	defer r.Close()
	p, err := r.Probe()
	if err != nil {
		return fmt.Sprintf("io_uring probe failed: %v", err)
	}
	if !p.Supports(uring.OpOpenat) || !p.Supports(uring.OpClose) {
		return "kernel lacks IORING_OP_OPENAT or IORING_OP_CLOSE (Linux ≥ 5.6 needed)"
	}
	if err := r.RegisterFiles([]int32{-1}); err != nil {
		return fmt.Sprintf("io_uring refuses a sparse registered file table: %v", err)
	}
	root := []byte("/\x00")
	e := r.SQE()
	e.PrepOpenatDirect(uring.ATFDCWD, &root[0], unix.O_RDONLY|unix.O_DIRECTORY, 0, 0)
	e.Flags |= uring.SQEIOLink
	e.UserData = 0
	e = r.SQE()
	e.PrepCloseDirect(0)
	e.UserData = 1
	if _, err := r.Submit(2); err != nil {
		return fmt.Sprintf("io_uring chained open and close: %v", err)
	}
	var res [2]int32
	for got := 0; got < 2; {
		c, ok := r.PeekCQE()
		if !ok {
			if _, err := r.Submit(1); err != nil {
				return fmt.Sprintf("io_uring chained open and close: %v", err)
			}
			continue
		}
		r.CQESeen()
		if c.UserData < 2 {
			res[c.UserData] = c.Res
		}
		got++
	}
	runtime.KeepAlive(root)
	if res[0] < 0 {
		return fmt.Sprintf("io_uring open into a direct descriptor refused: %v (Linux ≥ 5.15 needed)", unix.Errno(-res[0]))
	}
	if res[1] < 0 {
		return fmt.Sprintf("io_uring close of a direct descriptor refused: %v (Linux ≥ 5.15 needed)", unix.Errno(-res[1]))
	}
	return ""
}
