package cgroup

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/kernfile"
)

// Real file contents (Linux 6.x): v1 from this project's hybrid machine, v2 from a
// pure cgroup2 host.
const (
	v1MemoryStat = `cache 404451328
rss 37511168
rss_huge 0
shmem 4096
mapped_file 10080256
workingset_refault_anon 0
workingset_refault_file 49240
pgmajfault 1652
unevictable 8192
hierarchical_memory_limit 9223372036854771712
total_cache 404451328
total_rss 37515264
total_shmem 8192
total_mapped_file 10080256
total_workingset_refault_anon 0
total_workingset_refault_file 49240
total_pgmajfault 1700
total_unevictable 16384
`
	v2MemoryStat = `anon 1073741824
file 536870912
kernel 20971520
kernel_stack 1048576
shmem 4194304
file_mapped 8388608
unevictable 18874368
workingset_refault_anon 3
workingset_refault_file 1200
pgscan_kswapd 500
pgscan_direct 70
pgsteal_kswapd 480
pgsteal_direct 60
pgmajfault 42
`
	v2MemoryEvents = "low 0\nhigh 22\nmax 3\noom 2\noom_kill 1\noom_group_kill 0\n"
	v1OOMControl   = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
	v2CPUStat      = "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 40\nnr_throttled 12\nthrottled_usec 750000\nnr_bursts 0\nburst_usec 0\n"
	hybridCPUStat  = "usage_usec 11140603495\nuser_usec 9430617231\nsystem_usec 1709986264\nnice_usec 177133185\n"
	v1CPUStat      = "nr_periods 40\nnr_throttled 12\nthrottled_time 750000000\nnr_bursts 0\nburst_time 0\n"
	psiText        = "some avg10=1.50 avg60=0.20 avg300=0.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=789\n"
	meminfo        = "MemTotal:       24684328 kB\nMemFree:        15880000 kB\nMemAvailable:   22963000 kB\n"
	status         = "Name:\tpsiflow\nVmRSS:\t   41104 kB\nRssAnon:\t   30000 kB\nRssFile:\t   11000 kB\nRssShmem:\t     104 kB\n"
)

// TestFileReaders reads real files of both layouts through each reader, and
// malformed ones: every malformed line is a *ParseError naming the file and line.
func TestFileReaders(t *testing.T) {
	type result struct {
		v   any
		err error
	}
	keyed := func(p string) result { m, err := ReadKeyed(p); return result{m, err} }
	integer := func(p string) result { v, err := ReadInt(p); return result{v, err} }
	limit := func(p string) result {
		v, ok, err := ReadLimit(p)
		return result{[2]any{v, ok}, err}
	}
	memStat := func(v2 bool) func(string) result {
		return func(p string) result {
			s, err := ReadMemoryStat(p, v2)
			if err != nil {
				return result{nil, err}
			}
			get := func(k string) any {
				if v, ok := s.Get(k); ok {
					return v
				}
				return "absent"
			}
			return result{[]any{get("anon"), get("file"), get("shmem"), get("kernel"), get("pgmajfault"),
				get("workingset_refault_file"), get("pgscan_kswapd"), s.Unreclaimable()}, nil}
		}
	}
	sizes := func(keys ...string) func(string) result {
		return func(p string) result { v, err := ReadProcSizes(p, keys...); return result{v, err} }
	}
	psi := func(p string) result { v, err := ReadPSI(p); return result{v, err} }

	tests := []struct {
		name, text string
		read       func(string) result
		want       any
		errLine    int    // >0: want a *ParseError at this line; -1: a *ParseError for the value
		errText    string // in the error
	}{
		{"v2 memory.events", v2MemoryEvents, keyed,
			map[string]uint64{"low": 0, "high": 22, "max": 3, "oom": 2, "oom_kill": 1, "oom_group_kill": 0}, 0, ""},
		{"v1 memory.oom_control", v1OOMControl, keyed, map[string]uint64{"oom_kill_disable": 0, "under_oom": 0, "oom_kill": 2}, 0, ""},
		{"v1 cpu.stat", v1CPUStat, keyed,
			map[string]uint64{"nr_periods": 40, "nr_throttled": 12, "throttled_time": 750000000, "nr_bursts": 0, "burst_time": 0}, 0, ""},
		{"pids.events", "max 4\n", keyed, map[string]uint64{"max": 4}, 0, ""},
		{"uint64 max", "max 18446744073709551615\n", keyed, map[string]uint64{"max": math.MaxUint64}, 0, ""},
		{"empty lines", "\n\nlow 1\n\n", keyed, map[string]uint64{"low": 1}, 0, ""},
		{"keyed without a value", "low 1\nhigh\n", keyed, nil, 2, `"high": want "key value"`},
		{"keyed with two values", "low 1 2\n", keyed, nil, 1, `want "key value"`},
		{"keyed negative", "low 1\nhigh 2\nmax -5\n", keyed, nil, 3, "max: want an unsigned integer"},
		{"keyed not a number", "oom 0x10\n", keyed, nil, 1, "oom: want an unsigned integer"},

		{"v1 memory.stat", v1MemoryStat, memStat(false),
			[]any{uint64(37515264), uint64(404451328), uint64(8192), "absent", uint64(1700), uint64(49240), "absent", int64(37515264 + 8192 + 16384)}, 0, ""},
		{"v1 root memory.stat (no total_)", "cache 10\nrss 20\nshmem 1\nunevictable 2\npgmajfault 3\n", memStat(false),
			[]any{uint64(20), uint64(10), uint64(1), "absent", uint64(3), "absent", "absent", int64(23)}, 0, ""},
		{"v2 memory.stat", v2MemoryStat, memStat(true),
			[]any{uint64(1 << 30), uint64(512 << 20), uint64(4 << 20), uint64(20 << 20), uint64(42), uint64(1200), uint64(500), int64(1<<30 + 4<<20 + 18<<20)}, 0, ""},
		{"memory.stat malformed", "anon 1\nfile 2 kB\n", memStat(true), nil, 2, `"file 2 kB"`},

		{"memory.current", "1048576000\n", integer, int64(1048576000), 0, ""},
		{"memory.failcnt", "0\n", integer, int64(0), 0, ""},
		{"integer malformed", "12ab\n", integer, nil, -1, `"12ab": want an integer`},
		{"integer empty", "", integer, nil, -1, "want an integer"},

		{"v2 memory.max unlimited", "max\n", limit, [2]any{int64(0), false}, 0, ""},
		{"v2 memory.max", "268435456\n", limit, [2]any{int64(268435456), true}, 0, ""},
		{"v1 unlimited, 4 KiB pages", "9223372036854771712\n", limit, [2]any{int64(0), false}, 0, ""},
		{"v1 unlimited, 64 KiB pages", "9223372036854710272\n", limit, [2]any{int64(0), false}, 0, ""},
		{"v1 -1", "-1\n", limit, [2]any{int64(0), false}, 0, ""},
		{"pids.max", "64\n", limit, [2]any{int64(64), true}, 0, ""},
		{"zero limit", "0", limit, [2]any{int64(0), true}, 0, ""},
		{"limit malformed", "lots\n", limit, nil, -1, `"lots": want "max" or a number of bytes`},

		{"meminfo", meminfo, sizes("MemTotal:", "MemAvailable:"), []int64{24684328 << 10, 22963000 << 10}, 0, ""},
		{"status", status, sizes("RssAnon:", "RssShmem:"), []int64{30000 << 10, 104 << 10}, 0, ""},
		{"meminfo without the key", "MemFree: 1 kB\n", sizes("MemTotal:"), nil, 0, "no MemTotal: line"},
		{"meminfo bad number", "MemFree: 1 kB\nMemTotal: x kB\n", sizes("MemTotal:"), nil, 2, "want a number of kB"},
		{"meminfo bad unit", "MemTotal: 5 MB\n", sizes("MemTotal:"), nil, 1, `want "MemTotal: N kB"`},

		{"psi", psiText, psi, PSI{Some: Stall{Avg10: 1.5, Avg60: 0.2, Total: 123456 * time.Microsecond}, Full: Stall{Total: 789 * time.Microsecond}, HasFull: true}, 0, ""},
		{"psi cpu without full", "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n", psi, PSI{Some: Stall{Total: 5 * time.Microsecond}}, 0, ""},
		{"psi missing key", "some avg10=0.00 avg60=0.00 total=5\n", psi, nil, 1, "missing keys"},
		{"psi bad kind", "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nhalf avg10=0\n", psi, nil, 2, `unknown kind "half"`},
		{"psi bad percentage", "some avg10=101 avg60=0.00 avg300=0.00 total=5\n", psi, nil, 1, "not a percentage"},
		{"psi no some", "full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n", psi, nil, 0, `no "some" line`},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+string(rune('a'+i%26)))
			if err := os.WriteFile(p, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			r := tt.read(p)
			if tt.errText == "" {
				if r.err != nil || !reflect.DeepEqual(r.v, tt.want) {
					t.Fatalf("= %#v, %v; want %#v", r.v, r.err, tt.want)
				}
				return
			}
			if r.err == nil || !strings.Contains(r.err.Error(), tt.errText) || !strings.Contains(r.err.Error(), p) {
				t.Fatalf("error %v, want one naming %s and saying %q", r.err, p, tt.errText)
			}
			var pe *ParseError
			switch {
			case tt.errLine == 0:
			case !errors.As(r.err, &pe) || pe.File != p:
				t.Fatalf("error %v is not a *ParseError for %s", r.err, p)
			case tt.errLine > 0 && pe.Line != tt.errLine:
				t.Fatalf("error at line %d, want %d: %v", pe.Line, tt.errLine, r.err)
			case tt.errLine < 0 && pe.Line != 0:
				t.Fatalf("error at line %d of a one-value file: %v", pe.Line, r.err)
			}
		})
	}
	if _, err := ReadKeyed(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v, want a not-exist error", err)
	}
	if _, err := ReadPSI(filepath.Join(dir, "missing")); !errors.Is(err, ErrNoPSI) {
		t.Errorf("missing PSI file: %v, want ErrNoPSI", err)
	}
}

// TestGroupReaders reads every kind of file through the Group methods on fake trees
// of each layout.
func TestGroupReaders(t *testing.T) {
	for _, c := range layoutCases {
		t.Run(c.name, func(t *testing.T) {
			files := fakeFiles{}
			for k, v := range c.files() {
				files[k] = v
			}
			mem, pids, cpu := dirOf(c.layout, "memory"), dirOf(c.layout, "pids"), dirOf(c.layout, "cpu")
			v2 := c.layout == LayoutV2
			if v2 {
				files[mem+"/memory.stat"], files[mem+"/memory.peak"] = v2MemoryStat, "2147483648\n"
				files[cpu+"/cpu.stat"] = v2CPUStat
			} else {
				files[mem+"/memory.stat"], files[mem+"/memory.max_usage_in_bytes"] = v1MemoryStat, "2147483648\n"
				files[mem+"/memory.oom_control"], files[mem+"/memory.failcnt"] = v1OOMControl, "7\n"
				files[cpu+"/cpu.stat"] = v1CPUStat
				files[dirOf(c.layout, "cpuacct")+"/cpuacct.usage"] = "2500000000\n"
			}
			files[pids+"/pids.max"], files[pids+"/pids.events"] = "64\n", "max 4\n"
			_, g, _ := openFake(t, files)

			st, err := g.MemoryStat()
			if err != nil || st.V2 != v2 {
				t.Fatalf("MemoryStat = %+v, %v", st, err)
			}
			if anon, _ := st.Get("anon"); anon != map[bool]uint64{true: 1 << 30, false: 37515264}[v2] {
				t.Errorf("anon = %d", anon)
			}
			if peak, err := g.MemoryPeak(); err != nil || peak != 2<<30 {
				t.Errorf("MemoryPeak = %d, %v", peak, err)
			}
			ev, err := g.MemoryEvents()
			want := MemoryEvents{Low: 1, High: 22, Max: 3, OOM: 2, OOMKill: 1}
			if !v2 {
				want = MemoryEvents{Max: 7, OOMKill: 2}
			}
			if err != nil || ev != want {
				t.Errorf("MemoryEvents = %+v, %v; want %+v", ev, err, want)
			}
			cs, err := g.CPUStat()
			if err != nil || cs.Usage != 2500*time.Millisecond || cs.Periods != 40 || cs.Throttled != 12 || cs.ThrottledTime != 750*time.Millisecond {
				t.Errorf("CPUStat = %+v, %v", cs, err)
			}
			if n, limited, err := g.PidsMax(); err != nil || n != 64 || !limited {
				t.Errorf("PidsMax = %d, %v, %v", n, limited, err)
			}
			if n, err := g.PidsEvents(); err != nil || n != 4 {
				t.Errorf("PidsEvents = %d, %v", n, err)
			}

			// A malformed line names the group, the file and the line.
			p, _, err := g.File("memory.stat", "memory", "memory.stat")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("anon 1\nfile\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var pe *ParseError
			if _, err := g.MemoryStat(); !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(err.Error(), "cgroup psiflow/job") {
				t.Errorf("malformed memory.stat: %v", err)
			}
			if _, _, err := g.File("memory.nope", "memory", "memory.nope"); !errors.Is(err, ErrNoController) {
				t.Errorf("File of a missing file: %v, want ErrNoController", err)
			}
		})
	}
}

// FuzzReadKeyed: the flat-keyed parser never panics, and an accepted file is a map.
func FuzzReadKeyed(f *testing.F) {
	for _, s := range []string{v2MemoryEvents, v1CPUStat, v1MemoryStat, "max max\n", "a 1 2\n", "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseKeyed("f", s)
		var pe *ParseError
		switch {
		case err == nil && m == nil:
			t.Fatal("nil map without error")
		case err != nil && (!errors.As(err, &pe) || pe.Line < 1):
			t.Fatalf("error %v is not a *ParseError with a line", err)
		}
		_, _ = ParsePSI("f", s)
		_, _ = kernfile.ParseSizes("f", s, "MemTotal:")
	})
}
