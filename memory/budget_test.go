package memory

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/cgroup"
)

func TestByteBudget(t *testing.T) {
	tests := []struct {
		limit    int64
		fraction float64
		want     int64
		err      bool
	}{
		{1 << 30, 0, 256 << 20, false}, // default: a quarter
		{1 << 30, 0.5, 512 << 20, false},
		{1 << 30, 1, 1 << 30, false},
		{1<<30 + 4095, 1, 1 << 30, false}, // rounded down to a page
		{10000, 0.5, 4096, false},
		{4096, 0.5, 0, true},
		{1 << 30, -0.1, 0, true},
		{1 << 30, 1.5, 0, true},
	}
	for _, tc := range tests {
		got, err := ByteBudget(tc.limit, tc.fraction)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ByteBudget(%d, %v) = %d, %v; want %d, err %v", tc.limit, tc.fraction, got, err, tc.want, tc.err)
		}
	}
}

// TestByteBudgetIn derives the budget from fake cgroup trees: limited by a v2
// ancestor, by a v1 memory cgroup, and unlimited (MemTotal).
func TestByteBudgetIn(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    int64
		wantSrc string
	}{
		{"v2 ancestor limit", map[string]string{
			"cgroup.controllers":       "memory\n",
			"job.slice/memory.max":     "4294967296\n",
			"job.slice/app/memory.max": "max\n",
			"proc/self/cgroup":         "0::/job.slice/app\n",
			"proc/meminfo":             "MemTotal: 16777216 kB\n",
		}, 1 << 30, "job.slice/memory.max"},
		{"v1 memory limit", map[string]string{
			"memory/memory.limit_in_bytes":     "9223372036854771712\n",
			"memory/app/memory.limit_in_bytes": "2147483648\n",
			"unified/cgroup.controllers":       "\n",
			"proc/self/cgroup":                 "4:memory:/app\n0::/\n",
			"proc/meminfo":                     "MemTotal: 16777216 kB\n",
		}, 512 << 20, "memory/app/memory.limit_in_bytes"},
		{"unlimited: MemTotal", map[string]string{
			"cgroup.controllers": "memory\n",
			"app/memory.max":     "max\n",
			"proc/self/cgroup":   "0::/app\n",
			"proc/meminfo":       "MemTotal: 16777216 kB\n",
		}, 4 << 30, "proc/meminfo MemTotal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				full := filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tree, err := cgroup.OpenTree(root, cgroup.WithProc(filepath.Join(root, "proc")))
			if err != nil {
				t.Fatal(err)
			}
			got, src, err := ByteBudgetIn(tree, 0)
			if err != nil || got != tc.want || src != filepath.Join(root, tc.wantSrc) {
				t.Errorf("ByteBudgetIn = %d from %q, %v; want %d from %s", got, src, err, tc.want, tc.wantSrc)
			}
		})
	}
}

func TestDefaultByteBudgetHere(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux-only")
	}
	b, src, err := DefaultByteBudget(0)
	if err != nil {
		t.Fatal(err)
	}
	limit, _, err := cgroup.SelfMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	if b <= 0 || b > limit/4 || limit/4-b >= 4096 {
		t.Errorf("DefaultByteBudget = %d from %s; want a quarter of %d", b, src, limit)
	}
}

// TestSelfMemoryLimitHere: what uma.Config.MemoryLimit gets is the cgroup limit
// (capped by RLIMIT_AS, which these tests do not set) and says where it came from.
func TestSelfMemoryLimitHere(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux-only")
	}
	got, src, err := SelfMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	want, wantSrc, err := cgroup.SelfMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	if got > want || got <= 0 || !strings.Contains(src, wantSrc) {
		t.Errorf("SelfMemoryLimit = %d from %q; want at most the cgroup's %d from %q", got, src, want, wantSrc)
	}
}

func ExampleByteBudget() {
	// A loader in a container limited to 8 GiB gets 2 GiB in flight by default.
	b, err := ByteBudget(8<<30, 0)
	fmt.Println(b>>20, "MiB", err)
	// Output: 2048 MiB <nil>
}
