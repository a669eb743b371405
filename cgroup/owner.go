package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OwnerXattr is the extended attribute in which [Tree.New] records the group's owner
// on every directory of the group: "<pid> <start time>" of the creating process, the
// start time in clock ticks since boot (field 22 of /proc/<pid>/stat), so that a PID
// reused by another process does not pass for the owner.
const OwnerXattr = "user.psiflow.owner"

// Owner is the process that created a group.
type Owner struct {
	PID   int
	Start uint64 // clock ticks after boot, from /proc/<pid>/stat
}

// String formats the owner as stored in [OwnerXattr].
func (o Owner) String() string { return strconv.Itoa(o.PID) + " " + strconv.FormatUint(o.Start, 10) }

// parseOwner parses the value of [OwnerXattr].
func parseOwner(s string) (Owner, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), " ")
	pid, err1 := strconv.Atoi(a)
	start, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || pid <= 0 {
		return Owner{}, fmt.Errorf("owner %q: want \"<pid> <start time>\"", s)
	}
	return Owner{PID: pid, Start: start}, nil
}

// processOwner returns the owner record of a live process.
func processOwner(proc string, pid int) (Owner, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Owner{}, err
	}
	start, err := parseStartTime(string(b))
	if err != nil {
		return Owner{}, fmt.Errorf("%s/%d/stat: %w", proc, pid, err)
	}
	return Owner{PID: pid, Start: start}, nil
}

// parseStartTime returns field 22 (starttime) of a /proc/<pid>/stat line; the command
// name (field 2) is in parentheses and may hold spaces and parentheses itself.
func parseStartTime(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): starttime, field 22, is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Alive reports whether the owner is still running: a process with its PID exists and
// started at the recorded time.
func (t *Tree) Alive(o Owner) bool {
	cur, err := processOwner(t.proc, o.PID)
	return err == nil && cur.Start == o.Start
}
