//go:build !linux

package harness

// anonMemory returns n bytes from the Go heap, whose fresh large allocations are also
// left untouched until written.
func anonMemory(n int64) ([]byte, func(), error) {
	return make([]byte, n), func() {}, nil
}
