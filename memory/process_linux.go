//go:build linux

package memory

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PreferOOMVictim makes this process the OOM killer's first choice in its memory
// cgroup (oom_score_adj 1000): when the group runs out, the loader goes, not the
// trainer beside it. Raising the score needs no privilege; lowering it again does
// (CAP_SYS_RESOURCE), so the runtime does not undo it. It returns the old value.
func PreferOOMVictim() (old int, err error) {
	const path = "/proc/self/oom_score_adj"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	old, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("memory: %s: %q is not a number", path, strings.TrimSpace(string(b)))
	}
	if err := os.WriteFile(path, []byte("1000"), 0); err != nil {
		return old, fmt.Errorf("memory: set %s to 1000: %w", path, err)
	}
	return old, nil
}

// LockProgramText locks the pages of this program's own file mappings (its code
// and read-only data) as they are faulted in (mlock2 with MLOCK_ONFAULT), so that
// reclaim in a starving cgroup does not evict the code of the pressure monitor and
// of the loader, which then run at the speed of refaults. Only pages the program
// touches are locked; anonymous memory is untouched (UMA must stay free to give it
// back). It returns the bytes of mappings locked. Without CAP_IPC_LOCK the
// RLIMIT_MEMLOCK (often 8 MiB) may refuse it: the error says so.
func LockProgramText() (int64, error) {
	ranges, err := programMappings()
	if err != nil {
		return 0, fmt.Errorf("memory: lock program text: %w", err)
	}
	var locked int64
	var errs []error
	for _, r := range ranges {
		if _, _, e := unix.Syscall(unix.SYS_MLOCK2, r.Start, r.End-r.Start, unix.MLOCK_ONFAULT); e != 0 {
			errs = append(errs, fmt.Errorf("mlock2 %#x-%#x %s: %w", r.Start, r.End, r.Perms, e))
			continue
		}
		locked += int64(r.End - r.Start)
	}
	if len(errs) > 0 {
		return locked, fmt.Errorf("memory: lock program text: %w", errors.Join(errs...))
	}
	return locked, nil
}
