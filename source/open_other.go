//go:build !unix

package source

import (
	"errors"
	"io"
	"os"
)

// openRegular opens path read-only and refuses anything that is not a
// regular file, naming it. Systems other than Unix have no named pipes or
// device nodes in their file systems that an open would block on.
func openRegular(path string, _ bool, faults FaultInjector) (openedFile, error) {
	if faults != nil {
		if err := faults.Open(path); err != nil {
			return openedFile{}, &ReadError{Op: "open", Path: path, Off: -1, Err: err}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return openedFile{}, &ReadError{Op: "open", Path: path, Off: -1, Err: err}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return openedFile{}, &ReadError{Op: "stat", Path: path, Off: -1, Err: err}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return openedFile{}, notRegular(path, st.Mode())
	}
	id, _ := idOf(st)
	return openedFile{f: f, size: st.Size(), id: id}, nil
}

// pread is one positioned read (end of file is a short count, not an error).
func pread(f *os.File, b []byte, off int64) (int, error) {
	n, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}
