//go:build unix

package source

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openRegular opens path read-only so that it never blocks on what the path
// names, then refuses anything that is not a regular file, naming it.
//
// A named pipe opened for reading blocks until a writer opens it, and so
// would a read of a device or a socket; the open is made with O_NONBLOCK
// (which returns at once for a pipe, and fails with ENXIO for a socket),
// then fstat says what was opened. Only a regular file is kept, and its
// descriptor is made blocking again: io_uring answers reads of an
// O_NONBLOCK file on file systems without non-blocking reads (FUSE, some
// network file systems) with EAGAIN instead of completing them in its
// worker threads. With direct, O_DIRECT is asked for first and the file is
// opened buffered where the file system refuses it (tmpfs).
//
// The open does not follow the descriptor through a device's own open
// method without it: a device node in place of a listed file is opened
// (non-blocking) before it is refused, as any reader that opens before
// checking must.
func openRegular(path string, direct bool, faults FaultInjector) (openedFile, error) {
	if faults != nil {
		if err := faults.Open(path); err != nil {
			return openedFile{}, &ReadError{Op: "open", Path: path, Off: -1, Err: err}
		}
	}
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK
	fd, isDirect := -1, false
	var err error
	if direct && directFlag != 0 {
		if fd, err = openRetry(path, flags|directFlag); err == nil {
			isDirect = true
		}
	}
	if fd < 0 {
		if fd, err = openRetry(path, flags); err != nil {
			// A socket fails the open (ENXIO), as does a device without a driver:
			// say what the path names.
			var st unix.Stat_t
			if err != unix.ENOENT && unix.Stat(path, &st) == nil && uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
				return openedFile{}, notRegular(path, modeOf(uint32(st.Mode)))
			}
			return openedFile{}, &ReadError{Op: "open", Path: path, Off: -1, Err: err}
		}
	}
	var st unix.Stat_t
	if err := fstatRetry(fd, &st); err != nil {
		unix.Close(fd)
		return openedFile{}, &ReadError{Op: "stat", Path: path, Off: -1, Err: err}
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return openedFile{}, notRegular(path, modeOf(uint32(st.Mode)))
	}
	keep := 0
	if isDirect {
		keep = directFlag
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, keep); err != nil {
		unix.Close(fd)
		return openedFile{}, &ReadError{Op: "open", Path: path, Off: -1, Err: err}
	}
	return openedFile{
		f:      os.NewFile(uintptr(fd), path),
		direct: isDirect,
		size:   st.Size,
		id:     fileID{uint64(st.Dev), uint64(st.Ino)},
		remote: remoteFS(fd, uint64(st.Dev)),
	}, nil
}

func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

func fstatRetry(fd int, st *unix.Stat_t) error {
	for {
		err := unix.Fstat(fd, st)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// modeOf converts the S_IFMT bits of a stat mode to an fs.FileMode type.
func modeOf(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFREG:
		return 0
	}
	return fs.ModeIrregular
}

// pread is one pread(2) system call.
func pread(f *os.File, b []byte, off int64) (int, error) { return unix.Pread(int(f.Fd()), b, off) }
