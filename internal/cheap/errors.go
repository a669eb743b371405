package cheap

import "errors"

// ErrUnavailable is returned (wrapped) where the process has no malloc_trim to
// call: glibc is not loaded (a static binary, musl) or not the C library here.
var ErrUnavailable = errors.New("cheap: malloc_trim is not available in this process (no glibc loaded)")
