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
	removed, errs := t.removeChildren(func(dir, name string) bool {
		v, err := getxattr(filepath.Join(dir, name), OwnerXattr)
		if err != nil {
			return false
		}
		o, err := parseOwner(v)
		return err == nil && !t.Alive(o)
	})
	if len(errs) > 0 {
		return removed, fmt.Errorf("cgroup remove orphans: %w", errors.Join(errs...))
	}
	return removed, nil
}
