//go:build !amd64

package decode

// withAVX2 runs f: there are no AVX2 kernels on this architecture.
func withAVX2(_ bool, f func()) { f() }
