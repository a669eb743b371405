//go:build linux || darwin

package turbojpeg

import (
	"fmt"
	"os"
)

// EnvCalls names the environment variable that says how the per-image C
// calls are made: "syscall" (the default) or "direct" (linux/amd64 only;
// elsewhere it is accepted and means syscall).
//
// syscall is purego.SyscallN, which the Go runtime treats as a system call:
// it marks the goroutine as in a system call, and once a call has lasted a
// sysmon tick (20 µs to 10 ms) sysmon takes its P and hands it to another
// thread. Each 2–3 ms decode is such a call, so with as many decode workers
// as Ps every call is followed by a hand-off, a thread woken and parked
// again, and sysmon stays on its 20 µs tick: ≈ 20 context switches per image.
//
// direct runs the C function on the thread's system stack without that
// accounting: the goroutine keeps its P for the call, nothing is handed off
// and sysmon backs off. What it costs: while a call runs, its P runs no other
// goroutine, and a stop-the-world (each garbage collection has two) waits
// for the call to end. So only calls on images of at most [DirectMaxPixels]
// pixels are made directly (the header reads always are); larger images are
// decoded as system calls.
const EnvCalls = "PSIFLOW_TURBOJPEG_CALLS"

// DirectMaxPixels is the largest image (width × height of the JPEG) decoded
// by a direct call under [EnvCalls]=direct: about 10–20 ms of decoding.
const DirectMaxPixels = 1 << 22

// directFromEnv reads [EnvCalls]: whether calls are direct, or why the value
// is not understood.
func directFromEnv() (bool, error) {
	switch v := os.Getenv(EnvCalls); v {
	case "", "syscall":
		return false, nil
	case "direct":
		return directSupported, nil
	default:
		return false, fmt.Errorf("%s=%q: want syscall or direct", EnvCalls, v)
	}
}
