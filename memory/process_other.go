//go:build !linux

package memory

import "errors"

var errNotLinux = errors.New("memory: only on Linux")

// PreferOOMVictim makes this process the OOM killer's first choice; Linux only.
func PreferOOMVictim() (int, error) { return 0, errNotLinux }

// LockProgramText locks the program's code as it is faulted in; Linux only.
func LockProgramText() (int64, error) { return 0, errNotLinux }
