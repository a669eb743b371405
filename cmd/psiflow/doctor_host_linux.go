//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/kernfile"
)

// Capability bits (linux/capability.h).
const (
	capIPCLock     = 14
	capSysResource = 24
)

// hasCap reports whether the calling process has capability bit in its effective set
// (CapEff in /proc/self/status).
func hasCap(bit uint) (bool, error) {
	m, err := kernfile.ReadCapEff("/proc/self/status")
	if err != nil {
		return false, err
	}
	return m&(1<<bit) != 0, nil
}

func probePSI(ctx context.Context) (bool, string) {
	b, err := os.ReadFile("/proc/pressure/memory")
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, "no /proc/pressure: kernel built without CONFIG_PSI"
	case errors.Is(err, unix.EOPNOTSUPP):
		return false, "PSI disabled in this kernel (CONFIG_PSI_DEFAULT_DISABLED): boot with psi=1"
	case err != nil:
		return false, err.Error()
	}
	how := "on by default"
	if cmd, err := os.ReadFile("/proc/cmdline"); err == nil && strings.Contains(" "+string(cmd)+" ", " psi=1 ") {
		how = "psi=1 on the boot line"
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return true, fmt.Sprintf("%s; memory: %s", how, first)
}

// probePSITrigger writes a trigger with a 150 ms (2 s window) or 50 ms (shorter
// windows) stall threshold to /proc/pressure/memory, then closes it.
func probePSITrigger(windowUS int) (bool, string) {
	stallUS := 150000
	if windowUS < 2000000 {
		stallUS = 50000
	}
	trig := fmt.Sprintf("some %d %d", stallUS, windowUS)
	fd, err := unix.Open("/proc/pressure/memory", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Sprintf("open /proc/pressure/memory read-write: %v", err)
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, append([]byte(trig), 0))
	capRes, _ := hasCap(capSysResource)
	switch {
	case err == nil:
		return true, fmt.Sprintf("%q accepted (CAP_SYS_RESOURCE: %v)", trig, yesNo(capRes))
	case errors.Is(err, unix.EINVAL) && windowUS%2000000 != 0 && !capRes:
		return false, fmt.Sprintf("%q refused (EINVAL): without CAP_SYS_RESOURCE the window must be a multiple of 2 s; shorter windows need a user-namespace helper", trig)
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return false, fmt.Sprintf("%q refused (%v): no permission to create PSI triggers", trig, err)
	}
	return false, fmt.Sprintf("%q refused: %v", trig, err)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// probeVMPressure registers a "low" vmpressure event on this process's v1 memory cgroup
// and unregisters it by closing the eventfd.
func probeVMPressure(ctx context.Context) (bool, string) {
	self, err := cgroup.Self()
	if err != nil {
		return false, err.Error()
	}
	dir, err := self.V1Dir("memory")
	if err != nil {
		return false, "no v1 memory hierarchy (pure cgroup v2: PSI triggers replace vmpressure)"
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return false, fmt.Sprintf("eventfd: %v", err)
	}
	defer unix.Close(efd)
	lvl, err := os.Open(filepath.Join(dir, "memory.pressure_level"))
	if err != nil {
		return false, err.Error()
	}
	defer lvl.Close()
	ctl := filepath.Join(dir, "cgroup.event_control")
	if err := os.WriteFile(ctl, []byte(fmt.Sprintf("%d %d low", efd, lvl.Fd())), 0); err != nil {
		return false, fmt.Sprintf("register with %s: %v", ctl, err)
	}
	return true, "eventfd registered on " + filepath.Join(dir, "memory.pressure_level") + " (low/medium/critical)"
}

func probeMemlock(ctx context.Context) (bool, string) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		return false, fmt.Sprintf("getrlimit(RLIMIT_MEMLOCK): %v", err)
	}
	lim := func(v uint64) string {
		if v == unix.RLIM_INFINITY {
			return "unlimited"
		}
		return bytesize.Human(int64(v))
	}
	capLock, err := hasCap(capIPCLock)
	if err != nil {
		return false, err.Error()
	}
	detail := fmt.Sprintf("RLIMIT_MEMLOCK %s soft / %s hard; CAP_IPC_LOCK %s", lim(rl.Cur), lim(rl.Max), yesNo(capLock))
	switch {
	case capLock:
		return true, detail + " (the limit does not apply; pinning is bounded by the cgroup limit)"
	case rl.Cur == unix.RLIM_INFINITY:
		return true, detail
	}
	return false, detail + fmt.Sprintf(": only %s can be pinned or registered with io_uring (raise with ulimit -l or --ulimit memlock=-1)", lim(rl.Cur))
}

func probeMadvFree(ctx context.Context) (bool, string) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return false, fmt.Sprintf("mmap scratch page: %v", err)
	}
	defer unix.Munmap(mem)
	mem[0] = 1
	if err := unix.Madvise(mem, unix.MADV_FREE); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return false, "madvise(MADV_FREE): EINVAL (kernel before 4.5): UMA falls back to MADV_DONTNEED"
		}
		return false, fmt.Sprintf("madvise(MADV_FREE): %v", err)
	}
	pageout := "MADV_PAGEOUT yes"
	if err := unix.Madvise(mem, unix.MADV_PAGEOUT); err != nil {
		pageout = fmt.Sprintf("MADV_PAGEOUT no (%v)", err)
	}
	return true, "lazy free of private anonymous memory; " + pageout
}

func probeUserfaultfd(ctx context.Context) (bool, string) {
	fd, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK, 0, 0)
	dev := "/dev/userfaultfd " + map[bool]string{true: "present", false: "absent"}[exists("/dev/userfaultfd")]
	switch errno {
	case 0:
		unix.Close(int(fd))
		return true, "userfaultfd(2) works; " + dev
	case unix.ENOSYS:
		return false, "userfaultfd(2): ENOSYS (kernel without CONFIG_USERFAULTFD, or blocked by seccomp)"
	case unix.EPERM:
		return false, "userfaultfd(2): EPERM (vm.unprivileged_userfaultfd=0 and no CAP_SYS_PTRACE; or seccomp); " + dev
	}
	return false, fmt.Sprintf("userfaultfd(2): %v; %s", errno, dev)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ioUringParams is struct io_uring_params (120 bytes).
type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  [10]uint32
	cqOff                                                                  [10]uint32
}

func probeIOUring(ctx context.Context) (bool, string) {
	disabled := "io_uring_disabled unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil {
		disabled = "io_uring_disabled=" + strings.TrimSpace(string(b))
	}
	var p ioUringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&p)), 0)
	switch errno {
	case 0:
		unix.Close(int(fd))
		return true, fmt.Sprintf("io_uring_setup works (features %#x); %s", p.features, disabled)
	case unix.ENOSYS:
		return false, "io_uring_setup: ENOSYS (kernel without io_uring); readers use pread"
	case unix.EPERM:
		return false, fmt.Sprintf("io_uring_setup: EPERM (%s, or a seccomp profile such as Docker's default blocks it); readers use pread", disabled)
	}
	return false, fmt.Sprintf("io_uring_setup: %v; %s; readers use pread", errno, disabled)
}
