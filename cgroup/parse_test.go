package cgroup

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in      string
		v       int64
		limited bool
		err     bool
	}{
		{"max", 0, false, false},
		{"max\n", 0, false, false},
		{"-1", 0, false, false},
		{"9223372036854771712", 0, false, false}, // v1 unlimited, 4 KiB pages
		{"9223372036854710272", 0, false, false}, // v1 unlimited, 64 KiB pages
		{"268435456", 268435456, true, false},
		{"0", 0, true, false},
		{"12ab", 0, false, true},
		{"", 0, false, true},
	}
	for _, tc := range tests {
		v, limited, err := parseLimit(tc.in)
		if (err != nil) != tc.err || v != tc.v || limited != tc.limited {
			t.Errorf("parseLimit(%q) = %d, %v, %v; want %d, %v, err %v", tc.in, v, limited, err, tc.v, tc.limited, tc.err)
		}
	}
}

func TestParseFlatKeyed(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]uint64
		err  bool
	}{
		{"low 1\nhigh 2\nmax 3\noom 0\noom_kill 4\n", map[string]uint64{"low": 1, "high": 2, "max": 3, "oom": 0, "oom_kill": 4}, false},
		{"oom_kill_disable 0\nunder_oom 1\noom_kill 2", map[string]uint64{"oom_kill_disable": 0, "under_oom": 1, "oom_kill": 2}, false},
		{"max 18446744073709551615\n", map[string]uint64{"max": math.MaxUint64}, false},
		{"\n\n", map[string]uint64{}, false},
		{"novalue\n", nil, true},
		{"k -5x\n", nil, true},
	}
	for _, tc := range tests {
		got, err := parseFlatKeyed(tc.in)
		if (err != nil) != tc.err || (!tc.err && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("parseFlatKeyed(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseCPUStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		v2   bool
		want CPUStat
	}{
		{"v2", "usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 3\nnr_throttled 2\nthrottled_usec 1500\n", true,
			CPUStat{Usage: 10 * time.Microsecond, Periods: 3, Throttled: 2, ThrottledTime: 1500 * time.Microsecond}},
		{"v2 no cpu controller", "usage_usec 10\nuser_usec 5\nsystem_usec 5\n", true, CPUStat{Usage: 10 * time.Microsecond}},
		{"v1", "nr_periods 3\nnr_throttled 2\nthrottled_time 1500\nnr_bursts 0\nburst_time 0\n", false,
			CPUStat{Usage: -1, Periods: 3, Throttled: 2, ThrottledTime: 1500}},
		{"v1 saturates", "throttled_time 18446744073709551615\n", false, CPUStat{Usage: -1, ThrottledTime: math.MaxInt64}},
	}
	for _, tc := range tests {
		got, err := parseCPUStat(tc.in, tc.v2)
		if err != nil || got != tc.want {
			t.Errorf("%s: parseCPUStat = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		in     string
		q      int64
		period uint64
		err    bool
	}{
		{"max 100000", -1, 100000, false},
		{"150000 100000\n", 150000, 100000, false},
		{"150000", 0, 0, true},
		{"x 100000", 0, 0, true},
		{"max y", 0, 0, true},
	}
	for _, tc := range tests {
		q, p, err := parseCPUMax(tc.in)
		if (err != nil) != tc.err || q != tc.q || p != tc.period {
			t.Errorf("parseCPUMax(%q) = %d, %d, %v", tc.in, q, p, err)
		}
	}
}

func TestParseMemoryEvents(t *testing.T) {
	v2, err := parseMemoryEvents("low 1\nhigh 2\nmax 3\noom 4\noom_kill 5\noom_group_kill 6\n", "", true)
	if err != nil || v2 != (MemoryEvents{1, 2, 3, 4, 5, 6, false}) {
		t.Errorf("v2: %+v, %v", v2, err)
	}
	v1, err := parseMemoryEvents("oom_kill_disable 1\nunder_oom 1\noom_kill 3\n", "42\n", false)
	if err != nil || v1 != (MemoryEvents{Max: 42, OOMKill: 3, UnderOOM: true}) {
		t.Errorf("v1: %+v, %v", v1, err)
	}
	if _, err := parseMemoryEvents("oom_kill 3\n", "x", false); err == nil {
		t.Error("bad failcnt accepted")
	}
}

func TestParseProcCgroup(t *testing.T) {
	got, err := parseProcCgroup("12:cpu,cpuacct:/a\n1:name=systemd:/\n0::/user.slice/x\n")
	want := []procCgroup{
		{12, []string{"cpu", "cpuacct"}, "/a"},
		{1, []string{"name=systemd"}, "/"},
		{0, nil, "/user.slice/x"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("parseProcCgroup = %+v, %v", got, err)
	}
	// Paths may contain colons.
	got, err = parseProcCgroup("0::/a:b\n")
	if err != nil || got[0].path != "/a:b" {
		t.Errorf("colon path: %+v, %v", got, err)
	}
	for _, bad := range []string{"x::/\n", "0:/\n"} {
		if _, err := parseProcCgroup(bad); err == nil {
			t.Errorf("parseProcCgroup(%q) accepted", bad)
		}
	}
}

func TestParseMemTotal(t *testing.T) {
	if v, err := parseMemTotal("MemFree: 1 kB\nMemTotal:  24576000 kB\n"); err != nil || v != 24576000*1024 {
		t.Errorf("= %d, %v", v, err)
	}
	for _, bad := range []string{"", "MemTotal: x kB", "MemTotal: 5 MB"} {
		if _, err := parseMemTotal(bad); err == nil {
			t.Errorf("parseMemTotal(%q) accepted", bad)
		}
	}
}

func TestParseIOWeight(t *testing.T) {
	for in, want := range map[string]uint64{"default 100\n8:0 200\n": 100, "500\n": 500, "8:0 300\ndefault 50": 50} {
		if got, err := parseIOWeight(in); err != nil || got != want {
			t.Errorf("parseIOWeight(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseIOWeight("8:0 300\n"); err == nil {
		t.Error("no default accepted")
	}
}

func TestWeightShares(t *testing.T) {
	tests := []struct{ weight, shares uint64 }{
		{1, 10}, {100, 1024}, {200, 2048}, {50, 512}, {10000, 102400},
	}
	for _, tc := range tests {
		if got := WeightToShares(tc.weight); got != tc.shares {
			t.Errorf("WeightToShares(%d) = %d, want %d", tc.weight, got, tc.shares)
		}
		if got := SharesToWeight(tc.shares); got != tc.weight {
			t.Errorf("SharesToWeight(%d) = %d, want %d", tc.shares, got, tc.weight)
		}
	}
	if SharesToWeight(2) != 1 || SharesToWeight(262144) != 10000 || WeightToShares(0) != 2 {
		t.Error("clamping")
	}
}

func FuzzParseFlatKeyed(f *testing.F) {
	f.Add("low 1\nhigh 2\nmax 3\n")
	f.Add("nr_periods 3\nthrottled_time 18446744073709551615\n")
	f.Add("max max\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseFlatKeyed(s)
		if err == nil && m == nil {
			t.Fatal("nil map without error")
		}
		_, _ = parseCPUStat(s, true)
		_, _ = parseMemoryEvents(s, s, false)
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add("12:cpu,cpuacct:/a\n0::/x\n")
	f.Fuzz(func(t *testing.T, s string) {
		lines, err := parseProcCgroup(s)
		if err != nil {
			return
		}
		for _, l := range lines {
			if l.path == "" && l.hierarchy < 0 {
				t.Logf("odd line %+v", l)
			}
		}
	})
}
