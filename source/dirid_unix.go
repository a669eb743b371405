//go:build unix

package source

import (
	"io/fs"
	"syscall"
)

// idOf returns the device and inode of a file, for loop detection.
func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}
