package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Remove kills the group's processes (through cgroup.kill where the kernel has it, else
// SIGKILL to each PID listed in cgroup.procs), waits for them to leave, and removes the
// group's directories, the cgroup2 leaf first, then the v1 ones. Empty parents created by
// New for a nested name are removed when nothing else uses them; the shared parent
// directory ([DefaultParent]) is left in place. Only groups made by [Tree.New] can be
// removed; removing twice is an error.
func (g *Group) Remove() error {
	if !g.owned {
		return fmt.Errorf("cgroup %s: not created by this process; refusing to remove it", g.name)
	}
	dirs := g.dirs()
	var errs []error
	if err := g.killAll(5 * time.Second); err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		if err := rmdirRetry(d, 2*time.Second); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	// Remove the empty intermediate directories of a nested name ("a/b" leaves "a"), but
	// not the shared parent directory: a concurrent New in another process may be about to
	// create its group there, and on cgroup2 it carries the enabled controllers.
	if len(errs) == 0 {
		top := filepath.Clean(g.tree.parent)
		for _, d := range dirs {
			mount := strings.TrimSuffix(d, string(filepath.Separator)+g.name)
			stop := filepath.Join(mount, top)
			for p := filepath.Dir(d); len(p) > len(stop) && strings.HasPrefix(p, stop); p = filepath.Dir(p) {
				if os.Remove(p) != nil {
					break
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cgroup %s: remove: %w", g.name, errors.Join(errs...))
	}
	g.owned = false
	return nil
}

// Kill kills every process in the group and waits up to timeout for them to leave it.
func (g *Group) Kill(timeout time.Duration) error {
	if err := g.killAll(timeout); err != nil {
		return fmt.Errorf("cgroup %s: kill: %w", g.name, err)
	}
	return nil
}

func (g *Group) killAll(timeout time.Duration) error {
	dirs := g.dirs()
	deadline := time.Now().Add(timeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		// cgroup.kill (Linux 5.14+) also catches tasks forked while we look; the PIDs
		// listed in the v1 hierarchies (where a task may have been moved on its own) are
		// killed one by one.
		if g.v2 != "" {
			if p := filepath.Join(g.v2, "cgroup.kill"); exists(p) {
				_ = writeFile(p, "1")
			}
		}
		pids, err := g.pids(dirs)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in the group after %v", pids, timeout)
		}
		time.Sleep(delay)
	}
}

// pids lists the distinct PIDs in the cgroup.procs files of dirs.
func (g *Group) pids(dirs []string) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			if isNotExist(err) {
				continue
			}
			return nil, err
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("%s: pid %q: %w", filepath.Join(d, "cgroup.procs"), f, err)
			}
			if !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out, nil
}

// Procs returns the PIDs of the processes in the group (in any of its hierarchies).
func (g *Group) Procs() ([]int, error) {
	p, err := g.pids(g.dirs())
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return p, nil
}

// rmdirRetry removes a cgroup directory, retrying while the kernel still reports it busy
// (exiting tasks leave a cgroup shortly after they are reaped).
func rmdirRetry(dir string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := os.Remove(dir)
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
	}
}
