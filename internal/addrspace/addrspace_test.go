package addrspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMapped(t *testing.T) {
	tests := []struct {
		text string
		want int64
		err  string
	}{
		{"Name:\tpsiflow\nVmPeak:\t 2000 kB\nVmSize:\t 1409944 kB\nVmLck:\t 0 kB\n", 1409944 << 10, ""},
		{"VmSize:\t0 kB\n", 0, ""},
		{"Name:\tx\n", 0, "status: no VmSize: line"},
		{"Name:\tx\nVmSize:\t12 MB\n", 0, `status line 2: "VmSize:\t12 MB": want "VmSize: N kB"`},
		{"VmSize:\t-3 kB\n", 0, `status line 1: "VmSize:\t-3 kB": want a number of kB`},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "status")
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := mapped(path)
		if tc.err != "" {
			if err == nil || !strings.HasSuffix(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), path) {
				t.Errorf("%q: error %v, want one naming the file and ending %q", tc.text, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.text, got, err, tc.want)
		}
	}
}

const (
	mib = 1 << 20
	gib = 1 << 30
)

// st2G is a 2 GiB limit with 1.25 GiB mapped, 8 MiB stacks and 10 threads to come:
// the reserve is 128 MiB of heap + 80 MiB of stacks, 560 MiB left.
var st2G = Status{Limit: 2 * gib, Mapped: 1280 * mib, ThreadStack: 8 * mib, Threads: 10}

func TestStatus(t *testing.T) {
	if got := st2G.Reserve(); got != 208*mib {
		t.Fatalf("reserve %d, want 208 MiB", got)
	}
	if got := st2G.Available(); got != 560*mib {
		t.Fatalf("available %d, want 560 MiB", got)
	}
	unlimited := Status{Limit: Unlimited, ThreadStack: 8 * mib, Threads: 10}
	tests := []struct {
		name string
		st   Status
		n    int64
		fits bool
	}{
		{"no limit", unlimited, 1 << 50, true},
		{"fits exactly", st2G, 560 * mib, true},
		{"a page more", st2G, 560*mib + 4096, false},
		{"the reserve does not fit", Status{Limit: gib, Mapped: 900 * mib, ThreadStack: 8 * mib, Threads: 10}, 4096, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.st.Fit(`uma arena "x"`, tc.n)
			if (err == nil) != tc.fits {
				t.Fatalf("Fit(%d) = %v, want fits %v", tc.n, err, tc.fits)
			}
			if err == nil {
				return
			}
			var fe *FitError
			if !errors.As(err, &fe) || !errors.Is(err, ErrLimit) {
				t.Fatalf("%v is not a *FitError wrapping ErrLimit", err)
			}
			for _, want := range []string{`uma arena "x": `, "does not fit under the virtual-memory limit (RLIMIT_AS, ulimit -v) of ", "is mapped already", "10 thread stacks of 8 MiB"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q lacks %q", err, want)
				}
			}
		})
	}
}

func TestCheckStart(t *testing.T) {
	if err := st2G.CheckStart("run", 700*mib); err != nil {
		t.Fatalf("1.25 GiB + 700 MiB under 2 GiB: %v", err)
	}
	err := st2G.CheckStart("run", 800*mib)
	if err == nil || !errors.Is(err, ErrLimit) {
		t.Fatalf("1.25 GiB + 800 MiB under 2 GiB: %v, want ErrLimit", err)
	}
	for _, want := range []string{"of 2 GiB is too small for psiflow run", "mapped 1.2 GiB before psiflow started", "run needs about 800 MiB more", "raise it to at least 2.2 GiB (ulimit -v 2359296)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if err := (Status{Limit: Unlimited}).CheckStart("run", 1<<50); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}

func TestCapMemoryLimit(t *testing.T) {
	tests := []struct {
		name   string
		st     Status
		limit  int64
		want   int64
		source string // substring
		err    bool
	}{
		{"no limit", Status{Limit: Unlimited}, 24 * gib, 24 * gib, "MemTotal", false},
		{"the cgroup limit is smaller", st2G, 256 * mib, 256 * mib, "MemTotal", false},
		{"the address space is smaller", st2G, 24 * gib, 560 * mib, "RLIMIT_AS (ulimit -v) 2 GiB less 1.2 GiB mapped and 208 MiB kept for the Go runtime; 24 GiB from MemTotal", false},
		{"nothing left", Status{Limit: gib, Mapped: gib, ThreadStack: 8 * mib, Threads: 10}, 24 * gib, 0, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, src, err := tc.st.CapMemoryLimit(tc.limit, "MemTotal")
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err == nil && (got != tc.want || !strings.Contains(src, tc.source)) {
				t.Fatalf("%d from %q; want %d from %q", got, src, tc.want, tc.source)
			}
		})
	}
}

func TestCurrent(t *testing.T) {
	st, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if st.ThreadStack < 64<<10 || st.Threads < 9 {
		t.Fatalf("thread stack %d, threads %d", st.ThreadStack, st.Threads)
	}
	if st.Limited() && st.Mapped <= 0 {
		t.Fatalf("limited to %d but nothing mapped", st.Limit)
	}
}

// A mapping checked against a 2 GiB limit of which 1.25 GiB is mapped.
func ExampleStatus_Fit() {
	st := Status{Limit: 2 << 30, Mapped: 1280 << 20, ThreadStack: 8 << 20, Threads: 10}
	fmt.Println(st.Fit("read pool", 512<<20) == nil)
	fmt.Println(errors.Is(st.Fit("read pool", 1<<30), ErrLimit))
	// Output:
	// true
	// true
}

func TestCapMallocArenas(t *testing.T) {
	ok, err := CapMallocArenas(8) // glibc's own default for this many arenas or more: harmless here
	if err != nil {
		t.Skipf("no glibc mallopt here: %v", err)
	}
	if !ok {
		t.Fatal("mallopt(M_ARENA_MAX) refused without an error")
	}
}
