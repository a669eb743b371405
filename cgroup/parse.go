package cgroup

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// procCgroup is one line of /proc/<pid>/cgroup.
type procCgroup struct {
	hierarchy   int
	controllers []string // empty for the v2 line ("0::/path") and named v1 hierarchies
	path        string
}

// parseProcCgroup parses /proc/<pid>/cgroup (file names it in errors):
// "hierarchy-ID:controller-list:path" per line. The v2 line is "0::/path". Named v1
// hierarchies ("name=systemd") are kept with their name as the controller. A
// malformed line is a [*ParseError].
func parseProcCgroup(file, text string) ([]procCgroup, error) {
	var out []procCgroup
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, &ParseError{File: file, Line: n, Text: line, Err: errors.New("want hierarchy:controllers:path")}
		}
		id, err := strconv.Atoi(parts[0])
		if err != nil || id < 0 {
			return nil, &ParseError{File: file, Line: n, Text: line, Err: errors.New("hierarchy id: want a number")}
		}
		var ctls []string
		if parts[1] != "" {
			ctls = strings.Split(parts[1], ",")
		}
		out = append(out, procCgroup{hierarchy: id, controllers: ctls, path: parts[2]})
	}
	return out, nil
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
