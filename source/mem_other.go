//go:build !unix

package source

import "unsafe"

// mapAligned returns n bytes of Align-aligned heap memory (no mmap on this system).
func mapAligned(n int) ([]byte, error) {
	b := make([]byte, n+Align)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (Align - 1))
	return b[off : off+n : off+n], nil
}

func unmapAligned([]byte) {}

func dropPages([]byte) error { return nil }
