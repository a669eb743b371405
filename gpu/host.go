package gpu

import "github.com/psiflow/psiflow/gpu/internal/hostmem"

// CheckHost returns nil when b may be registered with a device or copied
// from asynchronously: it lies inside a live uma.Registration. Otherwise the
// error says what b is (the Go heap or other memory UMA does not own, UMA
// memory not recorded as registered, an empty range). Every Device checks
// this itself; CheckHost lets callers check first.
func CheckHost(b []byte) error { return hostmem.Check(b) }
