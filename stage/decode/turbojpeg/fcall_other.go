//go:build (linux || darwin) && !(linux && amd64)

package turbojpeg

import "github.com/ebitengine/purego"

// directSupported reports whether direct calls ([EnvCalls]) exist here:
// only on linux/amd64.
const directSupported = false

// directCall is never reached here ([Lib] and [RegionLib] never choose
// direct calls where directSupported is false); it makes the call as a
// system call.
func directCall(fn uintptr, args *[9]uintptr) uintptr {
	r1, _, _ := purego.SyscallN(fn, args[:]...)
	return r1
}
