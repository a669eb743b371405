package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// formatLimit writes a limit: a negative value means none ("max" on v2, "-1" on v1).
func formatLimit(v int64, v2 bool) string {
	switch {
	case v >= 0:
		return strconv.FormatInt(v, 10)
	case v2:
		return "max"
	}
	return "-1"
}

// SetMemoryMax sets the hard memory limit in bytes (memory.max on v2,
// memory.limit_in_bytes on v1); a negative value removes the limit. Beyond it the kernel
// reclaims, and with nothing left to reclaim OOM-kills a member of the group.
func (g *Group) SetMemoryMax(bytes int64) error {
	p, v2, err := g.file("memory.max", "memory", "memory.limit_in_bytes")
	if err != nil {
		return err
	}
	if err := writeFile(p, formatLimit(bytes, v2)); err != nil {
		return fmt.Errorf("cgroup %s: set memory limit: %w", g.name, err)
	}
	return nil
}

// SetMemoryHigh sets the throttling limit in bytes (memory.high on v2: above it the
// group's allocations are slowed and reclaimed hard; memory.soft_limit_in_bytes on v1: the
// group is reclaimed first under global pressure only, a weaker promise). A negative value
// removes it.
func (g *Group) SetMemoryHigh(bytes int64) error {
	p, v2, err := g.file("memory.high", "memory", "memory.soft_limit_in_bytes")
	if err != nil {
		return err
	}
	if err := writeFile(p, formatLimit(bytes, v2)); err != nil {
		return fmt.Errorf("cgroup %s: set memory high: %w", g.name, err)
	}
	return nil
}

// MemoryLimit returns the group's own hard memory limit (not its ancestors'; see
// [Tree.SelfMemoryLimit] for the effective one). limited is false when there is none.
func (g *Group) MemoryLimit() (bytes int64, limited bool, err error) {
	p, _, err := g.file("memory.max", "memory", "memory.limit_in_bytes")
	if err != nil {
		return 0, false, err
	}
	if bytes, limited, err = ReadLimit(p); err != nil {
		return 0, false, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return bytes, limited, nil
}

// MemoryCurrent returns the bytes charged to the group now (memory.current on v2,
// memory.usage_in_bytes on v1; both include page cache).
func (g *Group) MemoryCurrent() (int64, error) {
	return g.readInt("memory.current", "memory", "memory.usage_in_bytes")
}

// MemoryPeak returns the most bytes ever charged to the group (memory.peak on v2,
// memory.max_usage_in_bytes on v1).
func (g *Group) MemoryPeak() (int64, error) {
	return g.readInt("memory.peak", "memory", "memory.max_usage_in_bytes")
}

// MemoryStat reads the group's memory.stat (see [MemoryStat.Get] for its counters on
// either layout).
func (g *Group) MemoryStat() (MemoryStat, error) {
	p, v2, err := g.file("memory.stat", "memory", "memory.stat")
	if err != nil {
		return MemoryStat{}, err
	}
	st, err := ReadMemoryStat(p, v2)
	if err != nil {
		return MemoryStat{}, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return st, nil
}

// MemoryEvents counts memory events of a group since it was created. On v2 the fields
// are those of memory.events (hierarchical). On v1 only Max (memory.failcnt: how often
// usage hit the limit) and OOMKill (memory.oom_control's oom_kill) are known, and
// UnderOOM reports memory.oom_control's under_oom.
type MemoryEvents struct {
	// Low counts reclaims of the group below its memory.low protection (v2).
	Low uint64
	// High counts throttling at memory.high (v2).
	High uint64
	// Max counts how often usage reached the hard limit (v2 memory.events max; v1 failcnt).
	Max uint64
	// OOM counts times the group hit its limit with nothing left to reclaim (v2).
	OOM uint64
	// OOMKill counts processes killed by the OOM killer in the group.
	OOMKill uint64
	// OOMGroupKill counts group-wide OOM kills (v2, memory.oom.group).
	OOMGroupKill uint64
	// UnderOOM is true while a v1 group with the OOM killer disabled is stuck at its limit.
	UnderOOM bool
}

// MemoryEvents reads the group's memory event counters.
func (g *Group) MemoryEvents() (MemoryEvents, error) {
	p, v2, err := g.file("memory.events", "memory", "memory.oom_control")
	if err != nil {
		return MemoryEvents{}, err
	}
	m, err := ReadKeyed(p)
	if err != nil {
		return MemoryEvents{}, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	if v2 {
		return memoryEventsOf(m, 0, true), nil
	}
	failcnt, err := ReadInt(filepath.Join(filepath.Dir(p), "memory.failcnt"))
	if err != nil {
		return MemoryEvents{}, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return memoryEventsOf(m, failcnt, false), nil
}

// memoryEventsOf reads v2 memory.events, or v1 memory.oom_control plus memory.failcnt.
func memoryEventsOf(m map[string]uint64, failcnt int64, v2 bool) MemoryEvents {
	if v2 {
		return MemoryEvents{Low: m["low"], High: m["high"], Max: m["max"], OOM: m["oom"],
			OOMKill: m["oom_kill"], OOMGroupKill: m["oom_group_kill"]}
	}
	return MemoryEvents{Max: uint64(max(failcnt, 0)), OOMKill: m["oom_kill"], UnderOOM: m["under_oom"] != 0}
}

// PressurePath returns the group's PSI file for resource ("memory", "io" or "cpu"):
// <v2 dir>/<resource>.pressure. It fails when the group has no cgroup2 directory
// ([LayoutV1]) or the kernel has no such file (built without PSI).
func (g *Group) PressurePath(resource string) (string, error) {
	switch resource {
	case "memory", "io", "cpu", "irq":
	default:
		return "", fmt.Errorf("cgroup %s: unknown pressure resource %q (want memory, io or cpu)", g.name, resource)
	}
	if g.v2 == "" {
		return "", fmt.Errorf("cgroup %s: no cgroup2 directory on this %s host, so no %s.pressure: %w", g.name, g.tree.layout, resource, ErrNoController)
	}
	p := filepath.Join(g.v2, resource+".pressure")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("cgroup %s: %w (kernel without PSI?)", g.name, err)
	}
	return p, nil
}

// SelfMemoryLimit returns the effective memory limit of the calling process in the
// default tree; see [Tree.SelfMemoryLimit].
func SelfMemoryLimit() (bytes int64, source string, err error) {
	t, err := DefaultTree()
	if err != nil {
		return 0, "", err
	}
	return t.SelfMemoryLimit()
}

// SelfMemoryLimit returns the effective memory limit of the calling process: the
// smallest hard limit of its memory cgroup and every ancestor up to the mount root
// (memory.max on v2, memory.limit_in_bytes on v1; see [Tree.SelfLimitingGroup]),
// capped at the host's MemTotal. source names the file the value came from
// ("<proc>/meminfo MemTotal" when no cgroup limits the process).
func (t *Tree) SelfMemoryLimit() (bytes int64, source string, err error) {
	memPath := filepath.Join(t.proc, "meminfo")
	total, err := ReadProcSizes(memPath, "MemTotal:")
	if err != nil {
		return 0, "", fmt.Errorf("memory limit: %w", err)
	}
	l, err := t.SelfLimitingGroup()
	if err != nil {
		return 0, "", fmt.Errorf("memory limit: %w", err)
	}
	if l.Dir != "" && l.Limit < total[0] {
		return l.Limit, l.File, nil
	}
	return total[0], memPath + " MemTotal", nil
}

// LimitingGroup is the group whose hard memory limit bounds a process: see
// [Tree.SelfLimitingGroup].
type LimitingGroup struct {
	// Dir is the group's directory; "" when no group on the way up has a limit.
	Dir string
	// File is the limit file (Dir/memory.max or Dir/memory.limit_in_bytes).
	File string
	// Limit is the limit read from File, in bytes.
	Limit int64
	// V2 says whether Dir is a cgroup2 directory (for [ReadMemoryStat]).
	V2 bool
}

// SelfLimitingGroup finds, among the calling process's memory cgroup and its
// ancestors up to the mount root, the one with the smallest hard limit (on a v1 or
// hybrid host in the v1 memory hierarchy, else on cgroup2). A group without a limit
// file is passed over; any other read or parse error is returned.
func (t *Tree) SelfLimitingGroup() (LimitingGroup, error) {
	g, err := t.Self()
	if err != nil {
		return LimitingGroup{}, err
	}
	var dir, mount, file string
	v2 := false
	if d, ok := g.v1["memory"]; ok {
		dir, mount, file = d, t.v1["memory"], "memory.limit_in_bytes"
	} else if g.v2 != "" {
		dir, mount, file, v2 = g.v2, t.v2, "memory.max", true
	}
	var best LimitingGroup
	for dir != "" {
		p := filepath.Join(dir, file)
		if v, limited, err := ReadLimit(p); err == nil {
			if limited && (best.Dir == "" || v < best.Limit) {
				best = LimitingGroup{Dir: dir, File: p, Limit: v, V2: v2}
			}
		} else if !isNotExist(err) {
			return LimitingGroup{}, err
		}
		if dir == mount || !strings.HasPrefix(dir, mount) {
			break
		}
		dir = filepath.Dir(dir)
	}
	return best, nil
}
