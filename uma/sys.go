package uma

import "errors"

// errUnsupported is New's error on platforms other than Linux.
var errUnsupported = errors.New("uma: needs Linux (MADV_FREE, mincore and mlock semantics); this platform is not supported")

// advice is the platform-neutral name of a madvise(2) advice.
type advice int

const (
	adviseFree     advice = iota // MADV_FREE: lazy free, cancelled by a write
	adviseDontNeed               // MADV_DONTNEED: immediate zero and uncharge
	advisePageout                // MADV_PAGEOUT: reclaim now (anonymous: only after MADV_FREE without swap)
	adviseHugePage               // MADV_HUGEPAGE: back with transparent huge pages where possible
)

func (a advice) String() string {
	switch a {
	case adviseFree:
		return "MADV_FREE"
	case adviseDontNeed:
		return "MADV_DONTNEED"
	case advisePageout:
		return "MADV_PAGEOUT"
	case adviseHugePage:
		return "MADV_HUGEPAGE"
	}
	return "MADV(?)"
}

// kernel is the set of memory system calls UMA makes. The Linux implementation
// calls the kernel; tests wrap it to inject failures (EINVAL from MADV_FREE,
// EPERM from mlock) so the error paths run for real.
type kernel interface {
	mmap(n int) ([]byte, error)
	munmap(b []byte) error
	madvise(b []byte, a advice) error
	mlock(b []byte) error
	munlock(b []byte) error
	// mincore fills vec (one byte per page of b) with residency bits.
	mincore(b []byte, vec []byte) error
	pageSize() int
}
