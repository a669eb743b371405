package cgroup

import (
	"bufio"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parseUint parses a single cgroup value. "max" (v2) reads as math.MaxUint64.
func parseUint(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return math.MaxUint64, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		// v1 files such as cpu.cfs_quota_us say -1 for "no limit".
		if i, ierr := strconv.ParseInt(s, 10, 64); ierr == nil && i < 0 {
			return math.MaxUint64, nil
		}
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	return v, nil
}

// parseLimit parses a memory or pids limit: "max" (v2), "-1" or a v1 value at or above
// v1Unlimited mean no limit.
func parseLimit(s string) (v int64, limited bool, err error) {
	u, err := parseUint(s)
	if err != nil {
		return 0, false, err
	}
	if u == math.MaxUint64 || u >= v1Unlimited {
		return 0, false, nil
	}
	if u > math.MaxInt64 {
		return 0, false, fmt.Errorf("parse %q: out of range", s)
	}
	return int64(u), true, nil
}

// v1Unlimited is the smallest value a v1 memory.limit_in_bytes reports when unlimited:
// PAGE_COUNTER_MAX rounded down to a page is 0x7FFFFFFFFFFFF000 on 64-bit kernels with
// 4 KiB pages, and larger pages only make it smaller by a page; a limit of 2^62 bytes or
// more is treated as no limit.
const v1Unlimited = 1 << 62

// parseFlatKeyed parses "key value" lines (memory.events, cpu.stat, pids.events,
// memory.oom_control). Values that are not unsigned integers are an error naming the key.
func parseFlatKeyed(text string) (map[string]uint64, error) {
	m := make(map[string]uint64)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("line %q: want \"key value\"", line)
		}
		n, err := parseUint(v)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k, err)
		}
		m[k] = n
	}
	return m, sc.Err()
}

// procCgroup is one line of /proc/<pid>/cgroup.
type procCgroup struct {
	hierarchy   int
	controllers []string // empty for the v2 line ("0::/path") and named v1 hierarchies
	path        string
}

// parseProcCgroup parses /proc/<pid>/cgroup: "hierarchy-ID:controller-list:path" per line.
// The v2 line is "0::/path". Named v1 hierarchies ("name=systemd") are kept with their
// name as the controller.
func parseProcCgroup(text string) ([]procCgroup, error) {
	var out []procCgroup
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("line %q: want hierarchy:controllers:path", line)
		}
		id, err := strconv.Atoi(parts[0])
		if err != nil {
			return nil, fmt.Errorf("line %q: hierarchy id: %w", line, err)
		}
		var ctls []string
		if parts[1] != "" {
			ctls = strings.Split(parts[1], ",")
		}
		out = append(out, procCgroup{hierarchy: id, controllers: ctls, path: parts[2]})
	}
	return out, nil
}

// parseMemTotal returns MemTotal from /proc/meminfo text, in bytes.
func parseMemTotal(text string) (int64, error) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("MemTotal %q: %w", rest, err)
		}
		if len(f) > 1 && f[1] != "kB" {
			return 0, fmt.Errorf("MemTotal %q: unknown unit", rest)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no MemTotal line")
}

// parseCPUMax parses v2 cpu.max: "$MAX $PERIOD" where $MAX is "max" or microseconds.
func parseCPUMax(s string) (quotaUS int64, periodUS uint64, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("cpu.max %q: want \"max|quota period\"", s)
	}
	periodUS, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("cpu.max period %q: %w", f[1], err)
	}
	if f[0] == "max" {
		return -1, periodUS, nil
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("cpu.max quota %q: %w", f[0], err)
	}
	return q, periodUS, nil
}

// parseIOWeight returns the "default N" weight of v2 io.weight (or v1 blkio.bfq.weight,
// which is written the same way on recent kernels). A bare number (v1 blkio.weight) is also
// accepted.
func parseIOWeight(text string) (uint64, error) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "default":
			return strconv.ParseUint(f[1], 10, 64)
		case len(f) == 1:
			return strconv.ParseUint(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("io weight %q: no default weight", text)
}
