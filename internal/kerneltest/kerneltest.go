package kerneltest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// EnvRequire is the environment variable that turns skips into failures.
const EnvRequire = "PSIFLOW_REQUIRE_KERNEL"

// Feature is a kernel facility a test needs.
type Feature string

// The features a psiflow test can need.
const (
	// PSI: pressure stall information (/proc/pressure, memory.pressure) and its triggers.
	PSI Feature = "PSI"
	// Cgroups: creating cgroups and writing their limits (root, a writable cgroup file system).
	Cgroups Feature = "cgroups"
	// IOUring: the io_uring system calls.
	IOUring Feature = "io_uring"
	// Reclaim: madvise(MADV_PAGEOUT), the way tests make the kernel take pages.
	Reclaim Feature = "reclaim"
	// FUSE: mounting a FUSE file system with mount(2) (root, /dev/fuse), the
	// way tests hold a read of a regular file in the kernel (internal/stuckfs).
	FUSE Feature = "FUSE"
)

// Required reports whether PSIFLOW_REQUIRE_KERNEL=1 is set.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

type probed struct {
	ok  bool
	why string
}

var (
	mu     sync.Mutex
	probes = map[Feature]probed{}
)

// Supported reports whether this host offers f, by a probe of its own that
// does not depend on the test; why says what the probe found.
func Supported(f Feature) (ok bool, why string) {
	mu.Lock()
	defer mu.Unlock()
	if p, done := probes[f]; done {
		return p.ok, p.why
	}
	ok, why = probe(f)
	probes[f] = probed{ok, why}
	return ok, why
}

// Skip skips t because it could not get f (the message says why), or, when
// [Required] and the host supports f, fails it: with the switch on, a kernel
// test that the host could run must run.
func Skip(t testing.TB, f Feature, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		if ok, why := Supported(f); ok {
			t.Fatalf("%s=1 and this host supports %s (%s), but the test could not use it: %s", EnvRequire, f, why, msg)
		}
	}
	t.Skipf("%s: %s", f, msg)
}
