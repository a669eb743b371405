package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by the error of a dataset path that names
// something other than a regular file (a named pipe, a socket, a device, a
// directory), for instance because the file was replaced after the file list
// was taken. Such a path is opened without blocking and refused.
var ErrNotRegular = errors.New("not a regular file")

// ErrChanged is wrapped by the error of a file that was replaced by another
// between two opens of the same path (see [ReaderOptions.Direct]).
var ErrChanged = errors.New("file replaced while it was being read")

// openedFile is what openRegular returns: a descriptor of a regular file,
// opened blocking (O_NONBLOCK cleared), and its identity.
type openedFile struct {
	f      *os.File
	direct bool
	size   int64
	id     fileID
	// remote: the file lives on a network or user-space file system, whose
	// storage may not answer (see remoteFS).
	remote bool
}

// notRegular returns the error for a path whose file is of type mode.
func notRegular(path string, mode fs.FileMode) error {
	return &ReadError{Op: "open", Path: path, Off: -1, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kindOf(mode))}
}

// kindOf names a file type the way ls's documentation does.
func kindOf(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	case t&fs.ModeDir != 0:
		return "directory"
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeIrregular != 0:
		return "irregular file"
	default:
		return "file of mode " + t.String()
	}
}

// openFile opens path for a Reader: regular files only, never blocking on
// what the path names (see openRegular).
func openFile(path string, opts *ReaderOptions) (*File, error) {
	o, err := openRegular(path, opts.Direct, opts.Faults)
	if err != nil {
		return nil, err
	}
	return &File{Path: path, Size: o.size, f: o.f, id: o.id, direct: o.direct, remote: o.remote, slot: -1, opts: opts}, nil
}
