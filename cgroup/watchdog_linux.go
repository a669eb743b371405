//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The watchdog is the running binary re-executed (like the blocked start) with these
// variables: it waits on a pipe whose write end only its starter holds. A byte means
// "done, exit"; end of file means the starter died without cleaning up, and the
// watchdog kills everything in the group and removes its directories.
const (
	envWatchFD   = "PSIFLOW_CGROUP_WATCH_FD"
	envWatchDirs = "PSIFLOW_CGROUP_WATCH_DIRS"
)

// Watchdog is a process outside the group that removes the group, and kills what is
// in it, if the process that started the watchdog dies (SIGKILL included) before
// calling Stop. See [Group.Watch].
type Watchdog struct {
	w   *os.File
	cmd *exec.Cmd
}

// Watch starts a [Watchdog] for g: a copy of the running binary, in this process's own
// cgroup and its own process group (so a terminal's Ctrl-C does not reach it), blocked
// on a pipe. When this process exits in any way without [Watchdog.Stop], the pipe
// closes and the watchdog kills every process in g (cgroup.kill where available, else
// SIGKILL to each PID, until the group is empty) and removes g's directories, the
// cgroup2 leaf first. This also ends the grandchildren that PR_SET_PDEATHSIG on the
// direct child does not reach.
//
// The watchdog re-executes the running binary, which must call [RunHelper] (or
// reexec.Init) first thing in main; Watch refuses with [ErrNoHelper] when it did not.
func (g *Group) Watch() (*Watchdog, error) {
	if err := helperReady("watchdog"); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: watchdog: %w", g.name, err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"psiflow-cgroup-watchdog", g.name}
	cmd.Env = append(os.Environ(), envWatchFD+"=3", envWatchDirs+"="+strings.Join(g.dirs(), "\n"))
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("cgroup %s: watchdog: %w", g.name, err)
	}
	return &Watchdog{w: w, cmd: cmd}, nil
}

// Stop tells the watchdog that this process cleans up itself, and waits for it to exit.
func (d *Watchdog) Stop() error {
	if d == nil || d.w == nil {
		return nil
	}
	_, werr := d.w.Write([]byte{1})
	d.w.Close()
	d.w = nil
	err := d.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) || errors.Is(err, syscall.ECHILD) {
		err = nil // reaped by a subreaper loop, or it exited already: nothing to stop
	}
	return errors.Join(werr, err)
}

// PID returns the watchdog's process ID.
func (d *Watchdog) PID() int { return d.cmd.Process.Pid }

func watchdogMain(fdText, dirList string) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	fd, err := strconv.Atoi(fdText)
	if err != nil || dirList == "" {
		fmt.Fprintf(os.Stderr, "psiflow cgroup watchdog: bad %s=%q or empty %s\n", envWatchFD, fdText, envWatchDirs)
		return 2
	}
	var b [1]byte
	n, err := syscall.Read(fd, b[:])
	for errors.Is(err, syscall.EINTR) {
		n, err = syscall.Read(fd, b[:])
	}
	if n == 1 {
		return 0 // the owner cleans up itself
	}
	dirs := strings.Split(dirList, "\n")
	if err := killDirs(dirs, 10*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "psiflow cgroup watchdog: %v\n", err)
	}
	var errs []error
	for _, d := range dirs {
		if err := rmdirRetry(d, 5*time.Second); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "psiflow cgroup watchdog: %v\n", errors.Join(errs...))
		return 1
	}
	return 0
}

// killDirs kills every process listed in the cgroup.procs files of dirs until none is
// left or timeout passes.
func killDirs(dirs []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		var pids []int
		for _, d := range dirs {
			if p := filepath.Join(d, "cgroup.kill"); exists(p) {
				_ = writeFile(p, "1")
			}
			s, err := readFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(s) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in %v after %v", pids, dirs, timeout)
		}
		time.Sleep(delay)
	}
}
