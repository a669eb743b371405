//go:build linux

package cheap

import (
	"errors"
	"sync"

	"github.com/ebitengine/purego"
)

var (
	once    sync.Once
	symbol  uintptr
	missing error
)

// lookup finds malloc_trim among the objects the process has loaded.
func lookup() (uintptr, error) {
	once.Do(func() {
		p, err := purego.Dlsym(purego.RTLD_DEFAULT, "malloc_trim")
		switch {
		case err != nil:
			missing = errors.Join(ErrUnavailable, err)
		case p == 0:
			missing = ErrUnavailable
		default:
			symbol = p
		}
	})
	return symbol, missing
}

// Available reports whether [Trim] can give memory back here, or why not.
func Available() error {
	_, err := lookup()
	return err
}

// Trim runs malloc_trim(0): every arena's free pages go back to the kernel
// (madvise MADV_DONTNEED), whichever thread freed them. It returns whether glibc
// released any memory, or [ErrUnavailable] where there is no malloc_trim. It takes
// each arena's lock in turn, so it waits for a malloc in progress but never for a
// whole decode; a few milliseconds for tens of MiB.
func Trim() (bool, error) {
	p, err := lookup()
	if err != nil {
		return false, err
	}
	r, _, _ := purego.SyscallN(p, 0)
	return r != 0, nil
}
