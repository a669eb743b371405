//go:build linux

package cgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SetChildSubreaper makes the calling process a child subreaper
// (prctl(PR_SET_CHILD_SUBREAPER)): orphans among its descendants (a worker's children
// whose parent died) are re-parented to it instead of to init, so a launcher sees and
// reaps every process of its job. Pass false to undo.
func SetChildSubreaper(on bool) error {
	v := uintptr(0)
	if on {
		v = 1
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, v, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER, %d): %w", v, err)
	}
	return nil
}

// IsChildSubreaper reports whether the calling process is a child subreaper.
func IsChildSubreaper() (bool, error) {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false, fmt.Errorf("prctl(PR_GET_CHILD_SUBREAPER): %w", err)
	}
	return v != 0, nil
}

// Run reaps on every SIGCHLD and at least every interval (default 1 s) until ctx is done;
// it then returns ctx.Err().
func (r *Reaper) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Second
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if _, err := r.ReapOnce(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sig:
		case <-tick.C:
		}
	}
}

// ReapOnce reaps every zombie child not claimed by keep and returns how many it reaped.
func (r *Reaper) ReapOnce() (int, error) {
	pids, err := r.zombieChildren()
	if err != nil {
		return 0, fmt.Errorf("reaper: %w", err)
	}
	n := 0
	for _, pid := range pids {
		if r.keep(pid) {
			continue
		}
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if err != nil || got != pid {
			continue // reaped by someone else meanwhile
		}
		n++
		r.reaped.Add(1)
		if r.onReap != nil {
			r.onReap(pid, ws)
		}
	}
	return n, nil
}

// zombieChildren lists child processes of this process in state Z, from the children
// files of every thread (/proc/self/task/*/children), falling back to a scan of /proc
// where the kernel lacks them.
func (r *Reaper) zombieChildren() ([]int, error) {
	self := os.Getpid()
	var cands []int
	files, _ := filepath.Glob(filepath.Join(r.proc, strconv.Itoa(self), "task", "*", "children"))
	if len(files) > 0 {
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread exited
			}
			for _, s := range bytes.Fields(b) {
				if pid, err := strconv.Atoi(string(s)); err == nil {
					cands = append(cands, pid)
				}
			}
		}
	} else {
		entries, err := os.ReadDir(r.proc)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				cands = append(cands, pid)
			}
		}
	}
	var out []int
	for _, pid := range cands {
		b, err := os.ReadFile(filepath.Join(r.proc, strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		state, ppid, err := parseStat(b)
		if err == nil && state == 'Z' && ppid == self {
			out = append(out, pid)
		}
	}
	return out, nil
}

// parseStat returns the state and parent PID from /proc/<pid>/stat. The command name
// may contain spaces and parentheses, so the fields are read after the last ')'.
func parseStat(b []byte) (state byte, ppid int, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("stat: no ')'")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("stat: short line %q", b)
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return f[0][0], ppid, err
}
