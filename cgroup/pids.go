package cgroup

import (
	"fmt"
	"strconv"
)

// SetPidsMax limits the number of tasks (processes and threads) in the group
// (pids.max on both layouts); beyond it fork and clone fail with EAGAIN and pids.events
// "max" is incremented. A negative value removes the limit.
func (g *Group) SetPidsMax(n int64) error {
	p, _, err := g.file("pids.max", "pids", "pids.max")
	if err != nil {
		return err
	}
	v := "max"
	if n >= 0 {
		v = strconv.FormatInt(n, 10)
	}
	if err := writeFile(p, v); err != nil {
		return fmt.Errorf("cgroup %s: set pids max: %w", g.name, err)
	}
	return nil
}

// PidsCurrent returns the number of tasks in the group (pids.current).
func (g *Group) PidsCurrent() (int64, error) {
	return g.readInt("pids.current", "pids", "pids.current")
}

// PidsEvents returns how many times a fork or clone in the group failed on pids.max
// (the "max" line of pids.events).
func (g *Group) PidsEvents() (max uint64, err error) {
	p, _, err := g.file("pids.events", "pids", "pids.events")
	if err != nil {
		return 0, err
	}
	m, err := ReadKeyed(p)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return m["max"], nil
}

// PidsMax returns the group's pids.max; limited is false when there is none.
func (g *Group) PidsMax() (n int64, limited bool, err error) {
	p, _, err := g.file("pids.max", "pids", "pids.max")
	if err != nil {
		return 0, false, err
	}
	if n, limited, err = ReadLimit(p); err != nil {
		return 0, false, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return n, limited, nil
}
