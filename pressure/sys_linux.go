//go:build linux

package pressure

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// capSysResource is CAP_SYS_RESOURCE's bit number (linux/capability.h).
const capSysResource = 24

// HasCapSysResource reports whether the calling process holds CAP_SYS_RESOURCE in its
// effective set, which lets it arm PSI triggers with any window in 500ms..10s.
func HasCapSysResource() (bool, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, fmt.Errorf("read /proc/self/status: %w", err)
	}
	for line := range bytes.Lines(data) {
		v, ok := bytes.CutPrefix(line, []byte("CapEff:"))
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
		if err != nil {
			return false, fmt.Errorf("parse CapEff in /proc/self/status: %w", err)
		}
		return caps&(1<<capSysResource) != 0, nil
	}
	return false, errors.New("no CapEff line in /proc/self/status")
}

// SelfCgroupV2Dir returns the directory of the calling process's cgroup v2 group, from
// /proc/self/cgroup (the "0::" line) and /proc/self/mountinfo (the cgroup2 mount).
// On a hybrid host this is the group under /sys/fs/cgroup/unified.
func SelfCgroupV2Dir() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	rel := ""
	found := false
	for line := range strings.Lines(string(data)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			rel, found = p, true
			break
		}
	}
	if !found {
		return "", errors.New("/proc/self/cgroup has no cgroup v2 (\"0::\") line")
	}
	mount, root, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	if root != "/" {
		if r, ok := strings.CutPrefix(rel, root); ok {
			rel = r
		}
	}
	return filepath.Join(mount, rel), nil
}

// cgroup2Mount finds the first cgroup2 mount point and its root in /proc/self/mountinfo.
func cgroup2Mount() (mount, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("open /proc/self/mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 || qf[0] != "cgroup2" {
			continue
		}
		return unescapeMountinfo(pf[4]), unescapeMountinfo(pf[3]), nil
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	return "", "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
}

// unescapeMountinfo undoes the octal escapes (\040 for space) of mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// SelfPressurePath returns the PSI file of a resource ("memory", "io", "cpu") for the
// calling process's own cgroup v2 group when the kernel has one, else the system-wide
// /proc/pressure file. The reason says which was chosen and why.
func SelfPressurePath(resource string) (path, reason string) {
	dir, err := SelfCgroupV2Dir()
	if err != nil {
		return SystemPressurePath(resource), fmt.Sprintf("system-wide: %v", err)
	}
	p := filepath.Join(dir, resource+".pressure")
	if _, err := os.Stat(p); err != nil {
		return SystemPressurePath(resource), fmt.Sprintf("system-wide: own cgroup has no %s.pressure: %v", resource, err)
	}
	return p, "own cgroup " + dir
}

func closeFD(fd int) { unix.Close(fd) }
