//go:build linux

package addrspace

import (
	"fmt"
	"os"
	"strconv"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

type rlimits struct{ as, stack int64 }

// defaultStack is glibc's pthread stack size when RLIMIT_STACK is unlimited
// (ARCH_STACK_DEFAULT_SIZE on x86_64 and arm64).
const defaultStack = 2 << 20

func limits() (rlimits, error) {
	var as, st unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &as); err != nil {
		return rlimits{}, fmt.Errorf("getrlimit(RLIMIT_AS): %w", err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_STACK, &st); err != nil {
		return rlimits{}, fmt.Errorf("getrlimit(RLIMIT_STACK): %w", err)
	}
	l := rlimits{as: Unlimited, stack: defaultStack}
	if as.Cur != unix.RLIM_INFINITY && as.Cur < uint64(Unlimited) {
		l.as = int64(as.Cur)
	}
	if st.Cur != unix.RLIM_INFINITY && st.Cur < 1<<40 {
		l.stack = int64(st.Cur)
	}
	l.stack += int64(unix.Getpagesize()) // the guard page
	return l, nil
}

// mArenaMax is glibc's M_ARENA_MAX parameter of mallopt.
const mArenaMax = -8

// CapMallocArenas limits the C library's malloc to n arenas (mallopt(M_ARENA_MAX)).
// glibc gives each thread that calls malloc an arena of its own, up to eight per
// core, and reserves 64 MiB of address space for each: under RLIMIT_AS the
// libraries psiflow loads (libjpeg-turbo, libcuda) would otherwise reserve
// hundreds of MiB they never touch. It reports false, with the reason, where the C
// library has no mallopt (musl, or no C library loaded).
func CapMallocArenas(n int) (bool, error) {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return false, fmt.Errorf("addrspace: no glibc to cap malloc arenas: %w", err)
	}
	sym, err := purego.Dlsym(h, "mallopt")
	if err != nil {
		return false, fmt.Errorf("addrspace: libc.so.6 has no mallopt: %w", err)
	}
	if r, _, _ := purego.SyscallN(sym, uintptr(mArenaMax&0xffffffff), uintptr(n)); int32(r) != 1 {
		return false, fmt.Errorf("addrspace: mallopt(M_ARENA_MAX, %d) refused", n)
	}
	return true, nil
}

// Environment of [ReexecWithMallocArenas]: glibc reads MALLOC_ARENA_MAX when malloc
// starts, before any Go code runs; the marker says this process set it, so that it
// is taken out again and the programs psiflow starts do not inherit it.
const (
	envArenaMax = "MALLOC_ARENA_MAX"
	envReexec   = "PSIFLOW_ADDRSPACE_REEXEC"
)

// ReexecWithMallocArenas caps the C library's malloc arenas at n for the whole
// life of the process: glibc creates an arena, 64 MiB of address space, for each of
// the first threads that call malloc, before main runs, and mallopt cannot take them
// back. Unless MALLOC_ARENA_MAX is set already, it re-executes the running binary
// (same PID, arguments and environment) with MALLOC_ARENA_MAX=n; in the new image it
// removes the variable again and caps later arenas with mallopt. It returns only in
// the re-executed process, or with an error saying why the cap is not applied.
func ReexecWithMallocArenas(n int) error {
	if os.Getenv(envReexec) != "" {
		_ = os.Unsetenv(envReexec)
		_ = os.Unsetenv(envArenaMax)
		_, err := CapMallocArenas(n)
		return err
	}
	if _, set := os.LookupEnv(envArenaMax); set {
		return nil // the user's own choice
	}
	if _, err := CapMallocArenas(n); err != nil {
		return err // no glibc: nothing to gain from a re-exec
	}
	env := append(os.Environ(), envArenaMax+"="+strconv.Itoa(n), envReexec+"=1")
	err := unix.Exec("/proc/self/exe", os.Args, env)
	return fmt.Errorf("addrspace: re-executing with %s=%d: %w", envArenaMax, n, err)
}
