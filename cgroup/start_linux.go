//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// The blocked start works by re-executing the running binary (/proc/self/exe) with two
// environment variables set. [RunHelper], called first thing in main, sees them, waits for one byte
// on the inherited pipe, and then execs the real program with the caller's arguments and
// environment (minus these variables). The program a caller starts therefore only begins
// after its PID is in every cgroup: its memory is charged to the group from its first
// page. The trampoline itself is a Go runtime start-up charged to the caller's cgroup,
// and that charge goes away with its address space at exec.
const (
	envStartFD   = "PSIFLOW_CGROUP_START_FD"
	envStartPath = "PSIFLOW_CGROUP_START_PATH"
)

// trampolineStatus is the exit status of a trampoline whose parent gave up (no release
// byte) or whose exec failed.
const trampolineStatus = 127

func trampoline(fdText, path string) {
	fd, err := strconv.Atoi(fdText)
	if err != nil || path == "" {
		fmt.Fprintf(os.Stderr, "psiflow cgroup start: bad %s=%q or empty %s\n", envStartFD, fdText, envStartPath)
		os.Exit(trampolineStatus)
	}
	var b [1]byte
	n, err := syscall.Read(fd, b[:])
	for errors.Is(err, syscall.EINTR) {
		n, err = syscall.Read(fd, b[:])
	}
	if n != 1 {
		// The parent closed the pipe without releasing us: it could not move us into the
		// cgroup, or it died. Do not run the program outside its cgroup.
		os.Exit(trampolineStatus)
	}
	_ = syscall.Close(fd)
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envStartFD+"=") && !strings.HasPrefix(kv, envStartPath+"=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(path, os.Args, env)
	fmt.Fprintf(os.Stderr, "psiflow cgroup start: exec %s: %v\n", path, err)
	os.Exit(trampolineStatus)
}

// Start starts cmd inside the group so that everything the program allocates is charged
// to the group. When the group lives only on cgroup2 the child is created directly inside
// it (clone3 with CLONE_INTO_CGROUP, Linux 5.7+). Otherwise (v1 and hybrid hosts, where a
// process must join several hierarchies, or older kernels) the child is started blocked
// on a pipe, its PID is written to the cgroup.procs of every hierarchy, and only then is
// it released to exec the program; charges made before joining do not move, which is why
// the program must not run before. If joining fails the child is killed and reaped and
// the error returned. The caller waits for cmd as usual (cmd.Wait).
//
// Unless cmd.SysProcAttr sets another Pdeathsig, the child gets SIGKILL when its
// starter dies (PR_SET_PDEATHSIG): a killed launcher does not leave it running. Its
// own children are not covered; [Group.Watch] and [Tree.RemoveOrphans] are.
//
// The blocked path re-executes the running binary, which must therefore call
// [RunHelper] (or reexec.Init) first thing in main and in TestMain; Start refuses with
// [ErrNoHelper] when it did not. On it, a Path that exists but cannot be
// executed shows up as exit status 127 with a message on the child's stderr, not as an
// error from Start.
func (g *Group) Start(cmd *exec.Cmd) error {
	if cmd.Process != nil {
		return fmt.Errorf("cgroup %s: start %s: already started", g.name, cmd.Path)
	}
	if cmd.Err != nil {
		return fmt.Errorf("cgroup %s: start: %w", g.name, cmd.Err)
	}
	// The child dies with the thread that started it (PR_SET_PDEATHSIG, kept across
	// exec), unless the caller chose another signal.
	saved := cmd.SysProcAttr
	attr := &syscall.SysProcAttr{}
	if saved != nil {
		*attr = *saved
	}
	if attr.Pdeathsig == 0 {
		attr.Pdeathsig = syscall.SIGKILL
	}
	cmd.SysProcAttr = attr
	defer func() { cmd.SysProcAttr = saved }()
	if len(g.v1) == 0 && g.v2 != "" {
		err := g.startInto(cmd)
		if !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.E2BIG) {
			return err
		}
		// clone3 or CLONE_INTO_CGROUP unknown to this kernel: fall back to the blocked start.
	}
	return g.startBlocked(cmd)
}

func (g *Group) startInto(cmd *exec.Cmd) error {
	dir, err := os.Open(g.v2)
	if err != nil {
		return fmt.Errorf("cgroup %s: start %s: %w", g.name, cmd.Path, err)
	}
	defer dir.Close()
	saved := cmd.SysProcAttr
	attr := &syscall.SysProcAttr{}
	if saved != nil {
		*attr = *saved
	}
	attr.UseCgroupFD, attr.CgroupFD = true, int(dir.Fd())
	cmd.SysProcAttr = attr
	err = cmd.Start()
	cmd.SysProcAttr = saved
	if err != nil {
		return fmt.Errorf("cgroup %s: start %s: %w", g.name, cmd.Path, err)
	}
	return nil
}

func (g *Group) startBlocked(cmd *exec.Cmd) error {
	if err := helperReady("start " + cmd.Path + " blocked (the v1/hybrid layout, or no clone3 into a cgroup)"); err != nil {
		return fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("cgroup %s: start %s: %w", g.name, cmd.Path, err)
	}
	defer w.Close()
	path, args, env, extra := cmd.Path, cmd.Args, cmd.Env, cmd.ExtraFiles
	fd := 3 + len(extra)
	cmd.Env = append(cmd.Environ(), envStartFD+"="+strconv.Itoa(fd), envStartPath+"="+path)
	cmd.ExtraFiles = append(append([]*os.File(nil), extra...), r)
	cmd.Path = "/proc/self/exe"
	if len(args) == 0 {
		cmd.Args = []string{path}
	}
	err = cmd.Start()
	r.Close()
	cmd.Path, cmd.Args, cmd.Env, cmd.ExtraFiles = path, args, env, extra
	if err != nil {
		return fmt.Errorf("cgroup %s: start %s: %w", g.name, path, err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	for _, d := range g.dirs() {
		if err := writeFile(d+"/cgroup.procs", pid); err != nil {
			w.Close() // the trampoline sees EOF and exits without running the program
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("cgroup %s: start %s: move pid %s: %w", g.name, path, pid, err)
		}
	}
	if _, err := w.Write([]byte{1}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("cgroup %s: start %s: release pid %s: %w", g.name, path, pid, err)
	}
	return nil
}
