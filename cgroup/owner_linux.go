//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// setOwner records this process as the owner of every directory of g. It is best
// effort: a file system without user extended attributes (kernels before 5.7 on
// cgroupfs) leaves the group without a record, and [Tree.RemoveOrphans] then only
// recognises it by a "-<pid>" name ([Tree.RemoveStale]).
func (g *Group) setOwner() {
	o, err := processOwner(g.tree.proc, os.Getpid())
	if err != nil {
		return
	}
	for _, d := range g.dirs() {
		_ = syscall.Setxattr(d, OwnerXattr, []byte(o.String()), 0)
	}
}

// Owner returns the process recorded as the creator of g, and false when g has no
// record (made by another tool, or on a file system without user xattrs).
func (g *Group) Owner() (Owner, bool, error) {
	for _, d := range g.dirs() {
		v, err := getxattr(d, OwnerXattr)
		if err != nil {
			if errors.Is(err, syscall.ENODATA) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
				continue
			}
			return Owner{}, false, fmt.Errorf("cgroup %s: owner: %w", g.name, err)
		}
		o, err := parseOwner(v)
		if err != nil {
			return Owner{}, false, fmt.Errorf("cgroup %s: %w", g.name, err)
		}
		return o, true, nil
	}
	return Owner{}, false, nil
}

func getxattr(path, name string) (string, error) {
	var buf [64]byte
	n, err := syscall.Getxattr(path, name, buf[:])
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// RemoveOrphans removes the groups directly under the tree's parent directory whose
// recorded owner ([OwnerXattr]) is no longer running, killing what is still inside:
// groups left by a launcher or benchmark killed with SIGKILL, whatever their name.
// Groups without an owner record, and those of live owners, are left alone. It returns
// the names removed.
func (t *Tree) RemoveOrphans() ([]string, error) {
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
	var removed []string
	var errs []error
	for _, r := range roots {
		entries, err := os.ReadDir(filepath.Join(r, t.parent))
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || seen[name] {
				continue
			}
			v, err := getxattr(filepath.Join(r, t.parent, name), OwnerXattr)
			if err != nil {
				continue
			}
			o, err := parseOwner(v)
			if err != nil || t.Alive(o) {
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
	if len(errs) > 0 {
		return removed, fmt.Errorf("cgroup remove orphans: %w", errors.Join(errs...))
	}
	return removed, nil
}
