package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type layoutCase struct {
	name   string
	files  func() fakeFiles
	layout Layout
}

var layoutCases = []layoutCase{
	{"v2", func() fakeFiles { return fakeV2 }, LayoutV2},
	{"hybrid", func() fakeFiles { return fakeHybrid }, LayoutHybrid},
	{"v1", fakeV1, LayoutV1},
}

// dirOf returns, per layout, the fake directory of group psiflow/job that holds a
// controller's files.
func dirOf(layout Layout, controller string) string {
	switch {
	case layout == LayoutV2:
		return "psiflow/job"
	case layout == LayoutV1 && (controller == "cpu" || controller == "cpuacct"):
		return "cpu,cpuacct/psiflow/job"
	}
	return controller + "/psiflow/job"
}

func TestOpenTreeLayouts(t *testing.T) {
	for _, c := range layoutCases {
		t.Run(c.name, func(t *testing.T) {
			tree, _, root := openFake(t, c.files())
			if tree.Layout() != c.layout {
				t.Fatalf("layout %v, want %v", tree.Layout(), c.layout)
			}
			wantV2 := map[Layout]string{LayoutV2: root, LayoutHybrid: filepath.Join(root, "unified"), LayoutV1: ""}[c.layout]
			if tree.V2Root() != wantV2 {
				t.Errorf("V2Root = %q, want %q", tree.V2Root(), wantV2)
			}
			if c.layout != LayoutV2 {
				for _, ctl := range []string{"memory", "cpu", "cpuacct", "pids", "blkio"} {
					want := filepath.Join(root, strings.TrimSuffix(dirOf(c.layout, ctl), "/psiflow/job"))
					if got := tree.V1Root(ctl); got != want {
						t.Errorf("V1Root(%s) = %q, want %q", ctl, got, want)
					}
				}
			}
		})
	}
	if _, err := OpenTree(t.TempDir()); err == nil {
		t.Error("OpenTree of an empty directory succeeded")
	}
}

// TestWrites runs every setter against fake trees of each layout and checks the file
// written and its text.
func TestWrites(t *testing.T) {
	type want struct{ ctl, file, text string }
	tests := []struct {
		name string
		do   func(*Group) error
		v2   []want
		v1   []want // also hybrid
	}{
		{"memory max", func(g *Group) error { return g.SetMemoryMax(1 << 30) },
			[]want{{"memory", "memory.max", "1073741824"}}, []want{{"memory", "memory.limit_in_bytes", "1073741824"}}},
		{"memory max unlimited", func(g *Group) error { return g.SetMemoryMax(-1) },
			[]want{{"memory", "memory.max", "max"}}, []want{{"memory", "memory.limit_in_bytes", "-1"}}},
		{"memory high", func(g *Group) error { return g.SetMemoryHigh(512 << 20) },
			[]want{{"memory", "memory.high", "536870912"}}, []want{{"memory", "memory.soft_limit_in_bytes", "536870912"}}},
		{"cpu max", func(g *Group) error { return g.SetCPUMax(150*time.Millisecond, 100*time.Millisecond) },
			[]want{{"cpu", "cpu.max", "150000 100000"}},
			[]want{{"cpu", "cpu.cfs_quota_us", "150000"}, {"cpu", "cpu.cfs_period_us", "100000"}}},
		{"cpu max unlimited", func(g *Group) error { return g.SetCPUMax(0, 50*time.Millisecond) },
			[]want{{"cpu", "cpu.max", "max 50000"}},
			[]want{{"cpu", "cpu.cfs_quota_us", "-1"}, {"cpu", "cpu.cfs_period_us", "50000"}}},
		{"cpu weight", func(g *Group) error { return g.SetCPUWeight(200) },
			[]want{{"cpu", "cpu.weight", "200"}}, []want{{"cpu", "cpu.shares", "2048"}}},
		{"io weight", func(g *Group) error { return g.SetIOWeight(300) },
			[]want{{"io", "io.weight", "default 300"}}, []want{{"blkio", "blkio.bfq.weight", "300"}}},
		{"io limit", func(g *Group) error {
			return g.SetIOLimit(IOLimit{Major: 8, Minor: 0, ReadBPS: 1 << 20, ReadIOPS: 100})
		},
			[]want{{"io", "io.max", "8:0 rbps=1048576 wbps=max riops=100 wiops=max"}},
			[]want{{"blkio", "blkio.throttle.read_bps_device", "8:0 1048576"}, {"blkio", "blkio.throttle.read_iops_device", "8:0 100"},
				{"blkio", "blkio.throttle.write_bps_device", "8:0 0"}}},
		{"pids max", func(g *Group) error { return g.SetPidsMax(64) },
			[]want{{"pids", "pids.max", "64"}}, []want{{"pids", "pids.max", "64"}}},
		{"pids unlimited", func(g *Group) error { return g.SetPidsMax(-1) },
			[]want{{"pids", "pids.max", "max"}}, []want{{"pids", "pids.max", "max"}}},
	}
	for _, c := range layoutCases {
		for _, tc := range tests {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				_, g, root := openFake(t, c.files())
				if err := tc.do(g); err != nil {
					t.Fatal(err)
				}
				ws := tc.v1
				if c.layout == LayoutV2 {
					ws = tc.v2
				}
				for _, w := range ws {
					p := filepath.Join(root, dirOf(c.layout, w.ctl), w.file)
					if got := readFake(t, p); got != w.text {
						t.Errorf("%s = %q, want %q", p, got, w.text)
					}
				}
			})
		}
	}
}

// TestReads checks every getter against the fixture text of each layout. The fixtures
// hold the same facts in each layout's units (throttled 750 ms, usage 2.5 s, 7 tasks).
func TestReads(t *testing.T) {
	for _, c := range layoutCases {
		t.Run(c.name, func(t *testing.T) {
			tree, g, root := openFake(t, c.files())
			v2 := c.layout == LayoutV2

			st, err := g.CPUStat()
			if err != nil {
				t.Fatal(err)
			}
			want := CPUStat{Usage: 2500 * time.Millisecond, Periods: 40, Throttled: 12, ThrottledTime: 750 * time.Millisecond}
			if st != want {
				t.Errorf("CPUStat = %+v, want %+v", st, want)
			}
			if _, _, limited, err := g.CPUMax(); err != nil || limited {
				t.Errorf("CPUMax: limited %v, %v; want unlimited", limited, err)
			}
			if w, err := g.CPUWeight(); err != nil || w != 100 {
				t.Errorf("CPUWeight = %d, %v; want 100", w, err)
			}
			if w, err := g.IOWeight(); err != nil || w != 100 {
				t.Errorf("IOWeight = %d, %v; want 100", w, err)
			}
			if n, err := g.PidsCurrent(); err != nil || n != 7 {
				t.Errorf("PidsCurrent = %d, %v", n, err)
			}
			if n, err := g.PidsEvents(); err != nil || n != 4 {
				t.Errorf("PidsEvents = %d, %v", n, err)
			}
			if _, limited, err := g.MemoryLimit(); err != nil || limited {
				t.Errorf("MemoryLimit: limited %v, %v; want unlimited", limited, err)
			}
			cur, err := g.MemoryCurrent()
			wantCur := map[bool]int64{true: 1048576000, false: 52428800}[v2]
			if err != nil || cur != wantCur {
				t.Errorf("MemoryCurrent = %d, %v; want %d", cur, err, wantCur)
			}
			ev, err := g.MemoryEvents()
			wantEv := MemoryEvents{Low: 1, High: 22, Max: 3, OOM: 2, OOMKill: 1}
			if !v2 {
				wantEv = MemoryEvents{Max: 17, OOMKill: 2}
			}
			if err != nil || ev != wantEv {
				t.Errorf("MemoryEvents = %+v, %v; want %+v", ev, err, wantEv)
			}

			p, err := g.PressurePath("memory")
			switch c.layout {
			case LayoutV1:
				if !errors.Is(err, ErrNoController) {
					t.Errorf("PressurePath on v1: %q, %v; want ErrNoController", p, err)
				}
			default:
				if err != nil || !strings.HasSuffix(p, "psiflow/job/memory.pressure") {
					t.Errorf("PressurePath = %q, %v", p, err)
				}
			}
			d, err := g.V1Dir("memory")
			if v2 {
				if !errors.Is(err, ErrNoController) {
					t.Errorf("V1Dir on v2 = %q, %v; want ErrNoController", d, err)
				}
			} else if err != nil || d != filepath.Join(root, "memory/psiflow/job") {
				t.Errorf("V1Dir(memory) = %q, %v", d, err)
			}

			lim, src, err := tree.SelfMemoryLimit()
			if err != nil {
				t.Fatal(err)
			}
			wantLim, wantSrc := int64(8<<30), filepath.Join(root, "user.slice/memory.max")
			if !v2 {
				wantLim, wantSrc = 256<<20, filepath.Join(root, "memory/app/memory.limit_in_bytes")
			}
			if lim != wantLim || src != wantSrc {
				t.Errorf("SelfMemoryLimit = %d from %s, want %d from %s", lim, src, wantLim, wantSrc)
			}
		})
	}
}

func TestCPUStatHybridUsageOnly(t *testing.T) {
	// A hybrid group with no v1 cpu hierarchy falls back to the cgroup2 cpu.stat for usage.
	f := fakeFiles{}
	for k, v := range fakeHybrid {
		if !strings.HasPrefix(k, "cpu/") && !strings.HasPrefix(k, "cpuacct/") {
			f[k] = v
		}
	}
	f["unified/psiflow/job/cpu.stat"] = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"
	_, g, _ := openFake(t, f)
	st, err := g.CPUStat()
	if err != nil || st != (CPUStat{Usage: 1500 * time.Microsecond}) {
		t.Fatalf("CPUStat = %+v, %v", st, err)
	}
	if err := g.SetCPUMax(time.Second, 0); !errors.Is(err, ErrNoController) {
		t.Errorf("SetCPUMax without a cpu controller: %v; want ErrNoController", err)
	}
}

func TestSelfMemoryLimitUnlimited(t *testing.T) {
	f := fakeFiles{}
	for k, v := range fakeV2 {
		f[k] = v
	}
	f["user.slice/memory.max"] = "max\n"
	tree, _, root := openFake(t, f)
	lim, src, err := tree.SelfMemoryLimit()
	if err != nil || lim != 24576000*1024 || src != filepath.Join(root, "proc/meminfo")+" MemTotal" {
		t.Fatalf("SelfMemoryLimit = %d, %q, %v; want MemTotal", lim, src, err)
	}
}

func TestSelf(t *testing.T) {
	for _, c := range layoutCases {
		t.Run(c.name, func(t *testing.T) {
			tree, _, root := openFake(t, c.files())
			g, err := tree.Self()
			if err != nil {
				t.Fatal(err)
			}
			switch c.layout {
			case LayoutV2:
				if g.V2Dir() != filepath.Join(root, "user.slice/app") {
					t.Errorf("V2Dir = %q", g.V2Dir())
				}
			default:
				if d, _ := g.V1Dir("memory"); d != filepath.Join(root, "memory/app") {
					t.Errorf("V1Dir(memory) = %q", d)
				}
				// pids is at "/" in the fixture: the hierarchy root.
				if d, _ := g.V1Dir("pids"); d != filepath.Join(root, "pids") {
					t.Errorf("V1Dir(pids) = %q", d)
				}
			}
			if err := g.Remove(); err == nil {
				t.Error("Remove of Self succeeded")
			}
		})
	}
}

// TestNewRemoveFake creates and removes a group in fake trees: directories appear in
// every hierarchy, v2 controllers are enabled in the parents, and everything created
// goes away again.
func TestNewRemoveFake(t *testing.T) {
	for _, c := range layoutCases {
		t.Run(c.name, func(t *testing.T) {
			tree, _, root := openFake(t, c.files())
			g, err := tree.New("x/y")
			if err != nil {
				t.Fatal(err)
			}
			if g.Name() != "psiflow/x/y" {
				t.Errorf("Name = %q", g.Name())
			}
			dirs := g.dirs()
			wantN := map[Layout]int{LayoutV2: 1, LayoutHybrid: 6, LayoutV1: 4}[c.layout]
			if len(dirs) != wantN {
				t.Errorf("dirs = %v, want %d", dirs, wantN)
			}
			if c.layout == LayoutV2 {
				// The fixture's root enables cpu, memory, pids; New adds io.
				if got := readFake(t, filepath.Join(root, "cgroup.subtree_control")); got != "+io" {
					t.Errorf("root subtree_control = %q, want +io written", got)
				}
			}
			if _, err := tree.New("x/y"); err == nil {
				t.Error("duplicate New succeeded")
			}
			if err := g.Remove(); err != nil {
				t.Fatal(err)
			}
			for _, d := range dirs {
				if exists(d) || exists(filepath.Dir(d)) {
					t.Errorf("%s or its parent x still exists", d)
				}
			}
		})
	}
}

func TestNewRejectsBadNames(t *testing.T) {
	tree, _, _ := openFake(t, fakeV2)
	for _, name := range []string{"", "../x", "/abs", "a/../b", "a//b", "x\ny"} {
		if _, err := tree.New(name); err == nil {
			t.Errorf("New(%q) succeeded", name)
		}
	}
}

func TestRemoveStale(t *testing.T) {
	f := fakeFiles{}
	for k, v := range fakeHybrid {
		f[k] = v
	}
	// A group of a process that cannot exist (PID above pid_max), one of this live
	// process, and one without the prefix.
	for _, h := range []string{"unified", "memory", "pids"} {
		f[h+"/psiflow/test-dead-2147483647/"] = ""
		f[h+"/psiflow/test-live-"+itoa(os.Getpid())+"/"] = ""
		f[h+"/psiflow/job-2147483647/"] = ""
	}
	tree, _, root := openFake(t, f)
	removed, err := tree.RemoveStale("test-")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "test-dead-2147483647" {
		t.Fatalf("removed %v; want only test-dead-2147483647", removed)
	}
	for _, h := range []string{"unified", "memory", "pids"} {
		if exists(filepath.Join(root, h, "psiflow/test-dead-2147483647")) {
			t.Errorf("%s: stale group left", h)
		}
		for _, keep := range []string{"test-live-" + itoa(os.Getpid()), "job-2147483647"} {
			if !exists(filepath.Join(root, h, "psiflow", keep)) {
				t.Errorf("%s: %s removed", h, keep)
			}
		}
	}
	if _, err := tree.RemoveStale(""); err == nil {
		t.Error("empty prefix accepted")
	}
}

// TestSelfLimitingGroup: the smallest limit on the way up wins (a larger one below
// it, none, or a limit above MemTotal do not), a missing limit file is passed over
// and a malformed one is an error naming the file and line.
func TestSelfLimitingGroup(t *testing.T) {
	tests := []struct {
		name    string
		change  map[string]string // over fakeV2
		wantDir string            // relative to the root; "" none
		want    int64
		err     string
	}{
		{"the fake's", nil, "user.slice", 8 << 30, ""},
		{"smaller below", map[string]string{"user.slice/app/memory.max": "1073741824\n"}, "user.slice/app", 1 << 30, ""},
		{"larger below", map[string]string{"user.slice/app/memory.max": "17179869184\n"}, "user.slice", 8 << 30, ""},
		{"none", map[string]string{"user.slice/memory.max": "max\n"}, "", 0, ""},
		{"above MemTotal", map[string]string{"user.slice/memory.max": "99999999999999\n"}, "user.slice", 99999999999999, ""},
		{"malformed", map[string]string{"user.slice/app/memory.max": "lots\n"}, "", 0, `user.slice/app/memory.max: "lots": want "max" or a number of bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeFiles{}
			for k, v := range fakeV2 {
				f[k] = v
			}
			for k, v := range tt.change {
				f[k] = v
			}
			tree, _, root := openFake(t, f)
			l, err := tree.SelfLimitingGroup()
			if tt.err != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || !strings.HasSuffix(err.Error(), tt.err) {
					t.Fatalf("SelfLimitingGroup = %+v, %v; want a *ParseError ending %q", l, err, tt.err)
				}
				if _, _, err := tree.SelfMemoryLimit(); !strings.HasSuffix(fmt.Sprint(err), tt.err) {
					t.Errorf("SelfMemoryLimit: %v, want the same error", err)
				}
				return
			}
			want := LimitingGroup{}
			if tt.wantDir != "" {
				d := filepath.Join(root, tt.wantDir)
				want = LimitingGroup{Dir: d, File: filepath.Join(d, "memory.max"), Limit: tt.want, V2: true}
			}
			if err != nil || l != want {
				t.Fatalf("SelfLimitingGroup = %+v, %v; want %+v", l, err, want)
			}
		})
	}
}
