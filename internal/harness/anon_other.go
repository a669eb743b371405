//go:build !linux

package harness

// anonMemory returns n bytes from the Go heap, whose fresh large allocations are also
// left untouched until written.
func anonMemory(n int64) ([]byte, func(), error) {
	return make([]byte, n), func() {}, nil
}

// releasePages zeroes pages [from, to) of mem; without madvise the memory is given
// back only when the mapping goes.
func releasePages(mem []byte, from, to int64) error {
	if from < to {
		clear(mem[from*pageSize : to*pageSize])
	}
	return nil
}
