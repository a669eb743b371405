//go:build linux

package pressure

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/kernfile"
	"golang.org/x/sys/unix"
)

// capSysResource is CAP_SYS_RESOURCE's bit number (linux/capability.h).
const capSysResource = 24

// HasCapSysResource reports whether the calling process holds CAP_SYS_RESOURCE in its
// effective set, which lets it arm PSI triggers with any window in 500ms..10s.
func HasCapSysResource() (bool, error) {
	caps, err := kernfile.ReadCapEff("/proc/self/status")
	if err != nil {
		return false, err
	}
	return caps&(1<<capSysResource) != 0, nil
}

// SelfCgroupV2Dir returns the directory of the calling process's cgroup v2 group
// ([cgroup.Self]'s [cgroup.Group.V2Dir]). On a hybrid host this is the group under
// /sys/fs/cgroup/unified; on a v1-only host it fails.
func SelfCgroupV2Dir() (string, error) {
	g, err := cgroup.Self()
	if err != nil {
		return "", err
	}
	if g.V2Dir() == "" {
		return "", fmt.Errorf("cgroup %s: no cgroup2 directory on this %s host", g.Name(), g.Layout())
	}
	return g.V2Dir(), nil
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
