//go:build linux

package cheap

import (
	"runtime"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/psiflow/psiflow/cgroup"
)

// rssAnon is RssAnon of /proc/self/status in bytes.
func rssAnon(t *testing.T) int64 {
	t.Helper()
	v, err := cgroup.ReadProcSizes("/proc/self/status", "RssAnon:")
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func sym(t *testing.T, name string) uintptr {
	t.Helper()
	p, err := purego.Dlsym(purego.RTLD_DEFAULT, name)
	if err != nil || p == 0 {
		t.Skipf("no %s in this process (%v): not glibc", name, err)
	}
	return p
}

// TestTrimReturnsFreedCHeap fragments the C heap the way a decoder leaves it
// (many small blocks freed, every 64th kept, so nothing merges into the top of the
// heap and glibc keeps the pages) and checks that Trim gives the freed pages back:
// RssAnon falls by at least half of what was freed (MADV_DONTNEED uncharges at once).
func TestTrimReturnsFreedCHeap(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no malloc_trim: %v", err)
	}
	malloc, free, memset := sym(t, "malloc"), sym(t, "free"), sym(t, "memset")
	const block, blocks = 1 << 10, 48 << 10 // 48 MiB in 1 KiB blocks
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ptrs := make([]uintptr, blocks)
	for i := range ptrs {
		p, _, _ := purego.SyscallN(malloc, block)
		if p == 0 {
			t.Fatal("malloc failed")
		}
		purego.SyscallN(memset, p, uintptr(i%255+1), block) // resident
		ptrs[i] = p
	}
	kept := 0
	for i, p := range ptrs {
		if i%64 == 0 {
			kept++
			continue
		}
		purego.SyscallN(free, p)
		ptrs[i] = 0
	}
	defer func() {
		for _, p := range ptrs {
			if p != 0 {
				purego.SyscallN(free, p)
			}
		}
	}()
	freed := int64(blocks-kept) * block
	before := rssAnon(t)
	released, err := Trim()
	if err != nil {
		t.Fatal(err)
	}
	after := rssAnon(t)
	if !released {
		t.Errorf("malloc_trim(0) released nothing after %d MiB were freed", freed>>20)
	}
	if before-after < freed/2 {
		t.Errorf("RssAnon %d → %d kB after Trim: %d kB given back, want ≥ %d kB (half of what was freed)",
			before>>10, after>>10, (before-after)>>10, freed>>11)
	}
}

func TestAvailableAgreesWithTrim(t *testing.T) {
	_, err := Trim()
	if (err == nil) != (Available() == nil) {
		t.Errorf("Trim error %v, Available %v: they disagree", err, Available())
	}
}
