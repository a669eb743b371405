//go:build !linux

package cgroup

import "errors"

func (g *Group) setOwner() {}

// Owner is unavailable off Linux.
func (g *Group) Owner() (Owner, bool, error) {
	return Owner{}, false, errors.New("cgroup: owner records need Linux")
}

// RemoveOrphans is unavailable off Linux.
func (t *Tree) RemoveOrphans() ([]string, error) { return nil, errors.New("cgroup: needs Linux") }
