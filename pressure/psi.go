package pressure

import "github.com/psiflow/psiflow/cgroup"

// The PSI file format has one parser, in package cgroup (with the other cgroup file
// readers); this package names it for its own API.

// Stall is one line of a PSI file; see [cgroup.Stall].
type Stall = cgroup.Stall

// PSI is the content of a pressure file; see [cgroup.PSI].
type PSI = cgroup.PSI

// ErrNoPSI is returned (wrapped) when the kernel offers no PSI: the file is
// missing or reading it fails with EOPNOTSUPP (a kernel built with
// PSI_DEFAULT_DISABLED and booted without psi=1). It is [cgroup.ErrNoPSI].
var ErrNoPSI = cgroup.ErrNoPSI

// Parse parses the content of a PSI file such as /proc/pressure/memory or a cgroup's
// memory.pressure ([cgroup.ParsePSI]; errors name it "psi" and the line).
func Parse(data []byte) (PSI, error) { return cgroup.ParsePSI("psi", string(data)) }

// ReadPSI reads and parses a PSI file ([cgroup.ReadPSI]). A missing file or
// EOPNOTSUPP wraps [ErrNoPSI].
func ReadPSI(path string) (PSI, error) { return cgroup.ReadPSI(path) }

// SystemPressurePath returns the system-wide PSI file of a resource
// ("memory", "io" or "cpu"), e.g. /proc/pressure/memory.
func SystemPressurePath(resource string) string { return "/proc/pressure/" + resource }
