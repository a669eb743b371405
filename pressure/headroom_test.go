package pressure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/bytesize"
)

// hMiB is a mebibyte.
const hMiB = 1 << 20

func newTestHeadroom(t *testing.T, cfg HeadroomConfig) *Headroom {
	t.Helper()
	if cfg.Read == nil {
		cfg.Read = func() (MemorySample, error) { return MemorySample{}, nil }
	}
	h, err := NewHeadroom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHeadroomBudgetFollowsOthers(t *testing.T) {
	h := newTestHeadroom(t, HeadroomConfig{Floor: 40 * hMiB, BudgetFloor: 16 * hMiB, Max: 64 * hMiB, Reserve: 16 * hMiB, Lookahead: time.Second})
	t0 := time.Unix(1000, 0)
	// Alone: 256 MiB limit, the loader holds 30 MiB of its own.
	r := h.Observe(MemorySample{At: t0, Limit: 256 * hMiB, Limited: true, Unreclaimable: 30 * hMiB, Self: 30 * hMiB})
	if r.Allowance != 240*hMiB || r.Budget != 64*hMiB || r.BelowFloor || r.Changed {
		t.Fatalf("alone: %+v; want allowance 240 MiB, budget at max 64 MiB, not below the floor", r)
	}
	// A co-tenant at 150 MiB, steady for a while: allowance 256-150-16 = 90, budget 90-24 = 66 → max 64.
	for i := 1; i <= 20; i++ {
		r = h.Observe(MemorySample{At: t0.Add(time.Duration(i) * time.Second), Limit: 256 * hMiB, Unreclaimable: 180 * hMiB, Self: 30 * hMiB})
	}
	if r.Allowance < 89*hMiB || r.Allowance > 90*hMiB {
		t.Fatalf("steady co-tenant at 150 MiB: allowance %s, want about 90 MiB", bytesize.Human(r.Allowance))
	}
	// It grows to 200 MiB at 25 MiB/s. Its first second is a rise, not yet a
	// growth: not projected. From the second on the projection counts it ahead.
	r = h.Observe(MemorySample{At: t0.Add(21 * time.Second), Limit: 256 * hMiB, Unreclaimable: 205 * hMiB, Self: 30 * hMiB})
	if r.Growth <= 0 || r.Projected != 0 || r.Allowance != r.Current || r.BelowFloor {
		t.Fatalf("one second of growth: growth %.0f, projected %.0f, allowance %s, now %s, below %v; want a growth, not projected",
			r.Growth, r.Projected, bytesize.Human(r.Allowance), bytesize.Human(r.Current), r.BelowFloor)
	}
	r = h.Observe(MemorySample{At: t0.Add(22 * time.Second), Limit: 256 * hMiB, Unreclaimable: 230 * hMiB, Self: 30 * hMiB})
	if r.Projected <= 0 || r.Projected > r.Growth || r.Projected > 25*hMiB {
		t.Fatalf("two seconds of growth: growth %.0f, projected %.0f; want projected in (0, min(growth, 25 MiB/s)]", r.Growth, r.Projected)
	}
	want := 256*hMiB - 200*hMiB - 16*hMiB - int64(r.Projected)
	if d := r.Allowance - want; d < -hMiB || d > hMiB {
		t.Fatalf("growing co-tenant: allowance %s, want %s (others + growth × 1s ahead)", bytesize.Human(r.Allowance), bytesize.Human(want))
	}
	if !r.BelowFloor || !r.Changed || r.Budget != 16*hMiB {
		t.Fatalf("below the floor: %+v; want BelowFloor, Changed, budget at its floor 16 MiB", r)
	}
	if m := r.Message(40 * hMiB); !strings.Contains(m, "below its floor of 40 MiB: running at its floor") {
		t.Fatalf("message %q", m)
	}
	// Still below: not announced again.
	r = h.Observe(MemorySample{At: t0.Add(23 * time.Second), Limit: 256 * hMiB, Unreclaimable: 230 * hMiB, Self: 30 * hMiB})
	if !r.BelowFloor || r.Changed || r.Message(40*hMiB) != "" {
		t.Fatalf("second report below the floor: %+v, want no new announcement", r)
	}
	// Just above the floor: still below it (hysteresis), nothing announced.
	for i := 24; i <= 29; i++ {
		r = h.Observe(MemorySample{At: t0.Add(time.Duration(i) * time.Second), Limit: 256 * hMiB, Unreclaimable: 226 * hMiB, Self: 30 * hMiB})
	}
	if r.Allowance < 40*hMiB || r.Allowance >= 50*hMiB {
		t.Fatalf("allowance %s: the test wants it between the floor and the margin", bytesize.Human(r.Allowance))
	}
	if !r.BelowFloor || r.Changed {
		t.Fatalf("allowance %s, just above the floor: %+v; want still below (hysteresis)", bytesize.Human(r.Allowance), r)
	}
	// The co-tenant leaves: back above the floor, announced once.
	r = h.Observe(MemorySample{At: t0.Add(40 * time.Second), Limit: 256 * hMiB, Unreclaimable: 40 * hMiB, Self: 30 * hMiB})
	if r.BelowFloor || !r.Changed || !strings.Contains(r.Message(40*hMiB), "again") {
		t.Fatalf("after the co-tenant left: %+v %q", r, r.Message(40*hMiB))
	}
	if r.Budget != 64*hMiB {
		t.Fatalf("budget %s after recovery, want the max", bytesize.Human(r.Budget))
	}
}

func TestHeadroomDefaultReserveAndValidate(t *testing.T) {
	for _, tt := range []struct{ limit, reserve int64 }{
		{64 * hMiB, 8 * hMiB},
		{128 * hMiB, 8 * hMiB},
		{256 * hMiB, 16 * hMiB},
		{512 * hMiB, 32 * hMiB},
		{1 << 30, 64 * hMiB},
		{2 << 30, 64 * hMiB},
		{64 << 30, 64 * hMiB},
	} {
		if got := DefaultReserve(tt.limit); got != tt.reserve {
			t.Errorf("DefaultReserve(%s) = %s, want %s", bytesize.Human(tt.limit), bytesize.Human(got), bytesize.Human(tt.reserve))
		}
		h := newTestHeadroom(t, HeadroomConfig{Floor: 8 * hMiB, Max: 1 << 30})
		r := h.Observe(MemorySample{At: time.Unix(1, 0), Limit: tt.limit, Unreclaimable: 0})
		if r.Reserve != tt.reserve || r.Allowance != tt.limit-tt.reserve {
			t.Errorf("limit %s: reserve %s, allowance %s; want the default reserve %s",
				bytesize.Human(tt.limit), bytesize.Human(r.Reserve), bytesize.Human(r.Allowance), bytesize.Human(tt.reserve))
		}
	}
	for _, bad := range []HeadroomConfig{
		{Floor: 0, Max: 1},
		{Floor: 8, BudgetFloor: 9, Max: 10},
		{Floor: 8, Max: 1},
		{Floor: 8, Max: 8, Interval: 10 * time.Millisecond},
		{Floor: 8, Max: 8, Reserve: -1},
	} {
		if _, err := NewHeadroom(bad); err == nil {
			t.Errorf("NewHeadroom(%+v) accepted", bad)
		}
	}
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const statusText = "Name:\tloader\nVmRSS:\t  90000 kB\nRssAnon:\t   20480 kB\nRssFile:\t   1000 kB\nRssShmem:\t    1024 kB\n"

func TestCgroupMemoryV1AndV2(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		limit     int64
		unreclaim int64
		source    string
	}{
		{"v2 ancestor limit", map[string]string{
			"cgroup.controllers":       "memory\n",
			"job.slice/memory.max":     "268435456\n",
			"job.slice/memory.stat":    "anon 157286400\nfile 50000000\nshmem 1048576\nunevictable 4194304\n",
			"job.slice/app/memory.max": "max\n",
			"proc/self/cgroup":         "0::/job.slice/app\n",
			"proc/self/status":         statusText,
			"proc/meminfo":             "MemTotal: 16777216 kB\nMemAvailable: 8000000 kB\n",
		}, 256 * hMiB, 157286400 + 1048576 + 4194304, "job.slice/memory.max"},
		{"v1 hybrid limit", map[string]string{
			"memory/memory.limit_in_bytes":     "9223372036854771712\n",
			"memory/app/memory.limit_in_bytes": "268435456\n",
			"memory/app/memory.stat":           "cache 1000\nrss 5\nshmem 6\nunevictable 7\ntotal_cache 1000\ntotal_rss 104857600\ntotal_shmem 2097152\ntotal_unevictable 8388608\n",
			"unified/cgroup.controllers":       "\n",
			"proc/self/cgroup":                 "4:memory:/app\n0::/\n",
			"proc/self/status":                 statusText,
			"proc/meminfo":                     "MemTotal: 16777216 kB\nMemAvailable: 8000000 kB\n",
		}, 256 * hMiB, 104857600 + 2097152 + 8388608, "memory/app/memory.limit_in_bytes"},
		{"unlimited: the host", map[string]string{
			"cgroup.controllers": "memory\n",
			"app/memory.max":     "max\n",
			"proc/self/cgroup":   "0::/app\n",
			"proc/self/status":   statusText,
			"proc/meminfo":       "MemTotal: 16777216 kB\nMemAvailable: 8000000 kB\n",
		}, 16777216 << 10, (16777216 - 8000000) << 10, "proc/meminfo MemTotal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, tc.files)
			tree, err := cgroup.OpenTree(root, cgroup.WithProc(filepath.Join(root, "proc")))
			if err != nil {
				t.Fatal(err)
			}
			read, err := CgroupMemory(tree, filepath.Join(root, "proc"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := read()
			if err != nil {
				t.Fatal(err)
			}
			if s.Limit != tc.limit || s.Unreclaimable != tc.unreclaim || s.Self != (20480+1024)<<10 || !strings.HasSuffix(s.Source, tc.source) {
				t.Fatalf("sample %+v; want limit %d, unreclaimable %d, self %d, source …%s", s, tc.limit, tc.unreclaim, (20480+1024)<<10, tc.source)
			}
		})
	}
}

// TestCgroupMemoryBadFilesNameFileAndLine: a malformed line in any file the sample
// reads is an error naming the file and the line (cgroup's readers), never a line
// skipped or a zero.
func TestCgroupMemoryBadFilesNameFileAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, file, text string
		line             int
	}{
		{"stat value", "app/memory.stat", "anon lots\n", 1},
		{"stat line without a value", "app/memory.stat", "anon 5\nshmem\n", 2},
		{"limit", "app/memory.max", "lots\n", 0},
		{"status", "proc/self/status", "Name:\tx\nRssAnon:\t12 MB\nRssShmem:\t1 kB\n", 2},
		{"status without RssShmem", "proc/self/status", "RssAnon:\t12 kB\n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{
				"cgroup.controllers": "memory\n",
				"app/memory.max":     "268435456\n",
				"app/memory.stat":    "anon 5\n",
				"proc/self/cgroup":   "0::/app\n",
				"proc/self/status":   statusText,
				"proc/meminfo":       "MemTotal: 16777216 kB\nMemAvailable: 8000000 kB\n",
			}
			if tc.file != "app/memory.max" {
				files[tc.file] = tc.text
			}
			root := writeTree(t, files)
			tree, err := cgroup.OpenTree(root, cgroup.WithProc(filepath.Join(root, "proc")))
			if err != nil {
				t.Fatal(err)
			}
			read, err := CgroupMemory(tree, filepath.Join(root, "proc"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.file == "app/memory.max" { // found at start; broken later
				if err := os.WriteFile(filepath.Join(root, tc.file), []byte(tc.text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err = read()
			var pe *cgroup.ParseError
			switch {
			case err == nil || !strings.Contains(err.Error(), filepath.Join(root, tc.file)):
				t.Fatalf("error %v, want one naming %s", err, tc.file)
			case tc.line >= 0 && (!errors.As(err, &pe) || pe.Line != tc.line):
				t.Fatalf("error %v, want a cgroup.ParseError at line %d", err, tc.line)
			}
		})
	}
}

func TestHeadroomRunSamplesUntilCancelled(t *testing.T) {
	n := 0
	h := newTestHeadroom(t, HeadroomConfig{Floor: 8 * hMiB, Max: 64 * hMiB, Interval: 100 * time.Millisecond,
		Read: func() (MemorySample, error) {
			n++
			return MemorySample{At: time.Now(), Limit: 256 * hMiB}, nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	got := 0
	err := h.Run(ctx, func(r HeadroomReport) {
		got++
		if got == 3 {
			cancel()
		}
	}, nil)
	if err != nil || got != 3 || n != 3 {
		t.Fatalf("Run: err %v, %d reports from %d samples; want 3 and 3", err, got, n)
	}
}

func TestHeadroomOnSelf(t *testing.T) {
	tree, err := cgroup.DefaultTree()
	if err != nil {
		t.Skipf("no cgroup tree here: %v", err)
	}
	read, err := CgroupMemory(tree, "/proc")
	if err != nil {
		t.Skipf("no cgroup of this process: %v", err)
	}
	s, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if s.Limit <= 0 || s.Self <= 0 || s.Unreclaimable < 0 {
		t.Fatalf("sample of this process: %+v", s)
	}
}

// TestHeadroomOwnLockedTextIsNotGrowth: a loader that locks its code as it runs
// (memory.LockProgramText) adds its text to the group's unevictable memory while
// it starts. The allowance counts that text as taken, but its growth is the
// loader's own: projected as the others' growth (20 MiB a second) it paused a
// loader that had room (a cold start beside a co-tenant at 70% of 256 MiB paused
// at once). Text read in another group is not charged here and changes nothing.
func TestHeadroomOwnLockedTextIsNotGrowth(t *testing.T) {
	const co, self = 179 * hMiB, 20 * hMiB
	for _, charged := range []bool{true, false} { // the text was first read in this group, or elsewhere
		t.Run(fmt.Sprintf("charged here %v", charged), func(t *testing.T) {
			var text int64
			t0 := time.Unix(1000, 0)
			at := t0
			h := newTestHeadroom(t, HeadroomConfig{Floor: 38 * hMiB, BudgetFloor: 16 * hMiB, Max: 64 * hMiB, Reserve: 16 * hMiB,
				Read: func() (MemorySample, error) {
					s := MemorySample{At: at, Limit: 256 * hMiB, Limited: true, Unreclaimable: co + self, Self: self}
					if charged {
						s.Unreclaimable += text
						s.Unevictable = text
					}
					return s, nil
				},
				SelfLocked: func() int64 { return text }})
			var r HeadroomReport
			for i := range 11 { // 0 → 20 MiB of text in 2 MiB steps, 200 ms apart
				text, at = int64(i)*2*hMiB, t0.Add(time.Duration(i)*200*time.Millisecond)
				var err error
				if r, err = h.Update(); err != nil {
					t.Fatal(err)
				}
				if r.Growth != 0 || r.Allowance != r.Current || r.BelowFloor {
					t.Fatalf("%d MiB of own text: growth %.0f B/s, allowance %s, now %s, below the floor %v; want no growth",
						text/hMiB, r.Growth, bytesize.Human(r.Allowance), bytesize.Human(r.Current), r.BelowFloor)
				}
			}
			want := int64(co)
			if charged {
				want += text // taken: reclaim cannot have it
			}
			if r.Others() != want || r.Current != 256*hMiB-want-16*hMiB {
				t.Fatalf("others %s, now %s; want others %s", bytesize.Human(r.Others()), bytesize.Human(r.Current), bytesize.Human(want))
			}
		})
	}
}

func TestMemorySampleOwnText(t *testing.T) {
	tests := []struct {
		s    MemorySample
		want int64
	}{
		{MemorySample{SelfLocked: 20, Unevictable: 20}, 20},
		{MemorySample{SelfLocked: 20, Unevictable: 5}, 5},    // 15 charged elsewhere
		{MemorySample{SelfLocked: 0, Unevictable: 40}, 0},    // the others' locked pages
		{MemorySample{SelfLocked: 20, Unevictable: 100}, 20}, // and the others'
	}
	for _, tt := range tests {
		if got := tt.s.OwnText(); got != tt.want {
			t.Errorf("%+v.OwnText() = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// TestHeadroomGrowthOverHalfAnIntervalAtLeast: a sample a few milliseconds after
// the previous one (New's first sample, then the run's) does not turn a small
// step into a steep growth: 0.6 MiB in 20 ms was projected as 13 MiB a second
// ahead and paused a loader at start-up. The step counts once the span is long
// enough, measured from the earlier sample.
func TestHeadroomGrowthOverHalfAnIntervalAtLeast(t *testing.T) {
	h := newTestHeadroom(t, HeadroomConfig{Floor: 38 * hMiB, BudgetFloor: 16 * hMiB, Max: 64 * hMiB, Reserve: 16 * hMiB, Interval: 200 * time.Millisecond})
	t0 := time.Unix(1000, 0)
	sample := func(d time.Duration, others int64) HeadroomReport {
		return h.Observe(MemorySample{At: t0.Add(d), Limit: 256 * hMiB, Limited: true, Unreclaimable: others + 4*hMiB, Self: 4 * hMiB})
	}
	sample(0, 180*hMiB)
	step := int64(600 << 10)
	if r := sample(20*time.Millisecond, 180*hMiB+step); r.Growth != 0 || r.Allowance != r.Current {
		t.Fatalf("20 ms later: growth %.0f B/s, allowance %s, now %s; want no growth yet", r.Growth, bytesize.Human(r.Allowance), bytesize.Human(r.Current))
	}
	r := sample(220*time.Millisecond, 180*hMiB+step)
	want := 0.5 * float64(step) / 0.22 // from the first sample, smoothed
	if r.Growth < want*0.99 || r.Growth > want*1.01 {
		t.Fatalf("220 ms after the first sample: growth %.0f B/s, want %.0f (the step over 220 ms, smoothed)", r.Growth, want)
	}
}

// TestHeadroomTrainerStepPeaksAreNotProjected: a trainer at 85% of 2 GiB (its
// ballast and torch hold 1879 MiB) allocates a batch's activations at every step
// and frees them a moment later: +37 MiB within one 100 ms sample, then back
// (measured beside psiflow serve). Neither the rise nor the default reserve may
// leave the loader below its floor (39 MiB) then: with the rise projected a
// second ahead and a reserve of limit/16 (128 MiB), it paused at nearly every
// step. Nor may a step whose allocations come in two intervals, back to the
// height of the steps before it. A co-tenant that keeps growing is still
// projected, from its second interval on.
func TestHeadroomTrainerStepPeaksAreNotProjected(t *testing.T) {
	const limit, trainer, self, peak, floor = 2 << 30, 1879 * hMiB, 34 * hMiB, 37 * hMiB, 39 * hMiB
	h := newTestHeadroom(t, HeadroomConfig{Floor: floor, BudgetFloor: 13 * hMiB, Max: 512 * hMiB, Interval: 100 * time.Millisecond})
	t0 := time.Unix(1000, 0)
	i := 0
	sample := func(others int64) HeadroomReport {
		i++
		return h.Observe(MemorySample{At: t0.Add(time.Duration(i) * 100 * time.Millisecond), Limit: limit, Limited: true,
			Unreclaimable: others + self, Self: self})
	}
	for step := range 64 {
		// A step's peak in one sample, then one that rises over two samples
		// half a second later (the smoothed growth has forgotten the fall by
		// then), then one held for two samples.
		others := int64(trainer)
		switch step % 12 {
		case 1, 10, 11:
			others += peak
		case 6:
			others += peak / 3
		case 7:
			others += peak
		}
		r := sample(others)
		if r.Reserve != 64*hMiB {
			t.Fatalf("reserve %s at 2 GiB, want 64 MiB", bytesize.Human(r.Reserve))
		}
		if r.Projected != 0 || r.Allowance != r.Current || r.BelowFloor {
			t.Fatalf("sample %d (others %s): projected %.0f B/s, allowance %s, now %s, below the floor %v; want no projection, above the floor",
				step, bytesize.Human(others), r.Projected, bytesize.Human(r.Allowance), bytesize.Human(r.Current), r.BelowFloor)
		}
	}
	// A ramp once the peaks are older than the window: +10 MiB a sample (100
	// MiB/s). Its first rise is not projected, its second is, and the
	// projection leaves the loader less than what is left now.
	others := int64(trainer)
	var r HeadroomReport
	for range 25 {
		r = sample(others)
	}
	for k := 1; k <= 3; k++ {
		others += 10 * hMiB
		r = sample(others)
		switch {
		case k == 1 && r.Projected != 0:
			t.Fatalf("the ramp's first rise projected at %.0f B/s", r.Projected)
		case k >= 2 && (r.Projected <= 0 || r.Allowance >= r.Current):
			t.Fatalf("the ramp's rise %d: projected %.0f B/s, allowance %s, now %s; want projected, allowance below now",
				k, r.Projected, bytesize.Human(r.Allowance), bytesize.Human(r.Current))
		}
	}
}

// TestHeadroomRiseAndRecentPeak: Rise is the others' rise above their recent
// peak over the last interval (0 for a return to a height they held within
// PeakWindow, however steep), and RecentPeak their highest reading of the
// window, own locked text included as Others counts it; none without a window.
func TestHeadroomRiseAndRecentPeak(t *testing.T) {
	const limit, self, text = 2 << 30, 34 * hMiB, 8 * hMiB
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name   string
		window time.Duration
		others []int64 // one sample every 100 ms, own text left out
		rise   float64 // of the last sample, bytes/s
		peak   int64   // RecentPeak, own text included; 0: none
	}{
		{"a step's return to its height", 0, []int64{1800 * hMiB, 1840 * hMiB, 1802 * hMiB, 1840 * hMiB}, 0, 1840*hMiB + text},
		{"above the peak: the rise above it", 0, []int64{1800 * hMiB, 1840 * hMiB, 1802 * hMiB, 1844 * hMiB}, 40 * hMiB, 1844*hMiB + text},
		{"a ramp: its rate", 0, []int64{1800 * hMiB, 1810 * hMiB, 1820 * hMiB, 1830 * hMiB}, 100 * hMiB, 1830*hMiB + text},
		{"falling", 0, []int64{1840 * hMiB, 1830 * hMiB, 1820 * hMiB}, 0, 1840*hMiB + text},
		{"the peak left the window", 250 * time.Millisecond, []int64{1840 * hMiB, 1800 * hMiB, 1801 * hMiB, 1802 * hMiB, 1810 * hMiB}, 80 * hMiB, 1810*hMiB + text},
		{"no window: the previous sample only", -1, []int64{1840 * hMiB, 1800 * hMiB, 1820 * hMiB}, 200 * hMiB, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newTestHeadroom(t, HeadroomConfig{Floor: 39 * hMiB, Max: 512 * hMiB, Interval: 100 * time.Millisecond, PeakWindow: tt.window})
			if _, ok := h.RecentPeak(); ok {
				t.Fatal("a recent peak before the first sample")
			}
			var r HeadroomReport
			for i, o := range tt.others {
				r = h.Observe(MemorySample{At: t0.Add(time.Duration(i) * 100 * time.Millisecond), Limit: limit, Limited: true,
					Unreclaimable: o + self + text, Self: self, Unevictable: text, SelfLocked: text})
			}
			if d := r.Rise - tt.rise; d > 1 || d < -1 {
				t.Errorf("rise %.0f B/s, want %.0f", r.Rise, tt.rise)
			}
			peak, ok := h.RecentPeak()
			if ok != (tt.peak != 0) || peak != tt.peak {
				t.Errorf("recent peak %s (%v), want %s", bytesize.Human(peak), ok, bytesize.Human(tt.peak))
			}
		})
	}
}
