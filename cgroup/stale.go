package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RemoveStale removes the groups under the tree's parent directory whose names start
// with prefix and end in "-<pid>" where no process <pid> exists any more: groups left
// behind by a process that was killed before it could remove them (a test binary hit by
// its timeout, a launcher killed by SIGKILL). Processes still inside such a group are
// killed. It returns the names removed. Only names with the prefix are considered, so
// that groups of live processes and groups named by other conventions are never touched.
func (t *Tree) RemoveStale(prefix string) ([]string, error) {
	if prefix == "" {
		return nil, errors.New("cgroup remove stale: empty prefix would match every group")
	}
	removed, errs := t.removeChildren(func(_, name string) bool {
		if !strings.HasPrefix(name, prefix) {
			return false
		}
		i := strings.LastIndexByte(name, '-')
		pid, err := strconv.Atoi(name[i+1:])
		return i >= 0 && err == nil && pid > 0 && !processExists(pid)
	})
	if len(errs) > 0 {
		return removed, fmt.Errorf("cgroup remove stale %s*: %w", prefix, errors.Join(errs...))
	}
	return removed, nil
}

// removeChildren removes the groups directly under the tree's parent directory, in
// every hierarchy, for which stale(dir, name) is true (dir is that hierarchy's parent
// directory), killing what is still inside. A name is judged in each hierarchy until
// one says stale. It returns the names removed and the removals that failed.
func (t *Tree) removeChildren(stale func(dir, name string) bool) (removed []string, errs []error) {
	roots := []string{}
	if t.v2 != "" {
		roots = append(roots, t.v2)
	}
	for _, c := range v1Controllers {
		if m, ok := t.v1[c]; ok {
			roots = append(roots, m)
		}
	}
	seen := map[string]bool{}
	for _, r := range roots {
		dir := filepath.Join(r, t.parent)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || seen[name] || !stale(dir, name) {
				continue
			}
			seen[name] = true
			g, err := t.Open(filepath.Join(t.parent, name))
			if err != nil {
				continue
			}
			g.owned = true
			if err := g.Remove(); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, name)
		}
	}
	return removed, errs
}

// processExists reports whether a process with this PID exists (as seen by this
// process's PID namespace).
func processExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
