package decode

// withAVX2 runs f with the AVX2 kernels enabled or not (enabled only where
// the CPU has them).
func withAVX2(on bool, f func()) {
	saved := haveAVX2
	haveAVX2 = on && saved
	defer func() { haveAVX2 = saved }()
	f()
}
