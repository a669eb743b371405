//go:build linux && amd64

package turbojpeg

import "unsafe"

// asmcgocall runs fn(arg) on the thread's system stack, the step of
// runtime.cgocall (and so of purego.SyscallN) between its entersyscall and
// exitsyscall. Called without them the goroutine keeps its P while the C
// code runs: see [EnvCalls] for what that saves and costs.
//
//go:linkname asmcgocall runtime.asmcgocall
//go:noescape
func asmcgocall(fn uintptr, arg unsafe.Pointer) int32

// fcallTrampoline is defined in fcall_amd64.s and reached only through its
// address (fcallAddr), which staticcheck does not see.
//
//lint:ignore U1000 defined in fcall_amd64.s, its address taken there
func fcallTrampoline()
func fcallAddr() uintptr

var addrFcall = fcallAddr()

// directSupported reports whether direct calls ([EnvCalls]) exist here.
const directSupported = true

// fcall is the block fcallTrampoline reads (fcall_amd64.s: fn at 0, args at
// 8..72, r at 80).
type fcall struct {
	fn   uintptr
	args [9]uintptr
	r    uintptr
}

// directCall calls the C function fn with the nine words of args on the
// system stack without entering a system call, and returns its result
// register. The buffers whose addresses are in args must be kept alive by
// the caller, as for purego.SyscallN; the goroutine's stack cannot move
// while the call runs (the goroutine is running, on the system stack).
func directCall(fn uintptr, args *[9]uintptr) uintptr {
	c := fcall{fn: fn, args: *args}
	asmcgocall(addrFcall, unsafe.Pointer(&c))
	return c.r
}
