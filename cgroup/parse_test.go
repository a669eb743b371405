package cgroup

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

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

func TestParseProcCgroup(t *testing.T) {
	got, err := parseProcCgroup("cgroup", "12:cpu,cpuacct:/a\n1:name=systemd:/\n0::/user.slice/x\n")
	want := []procCgroup{
		{12, []string{"cpu", "cpuacct"}, "/a"},
		{1, []string{"name=systemd"}, "/"},
		{0, nil, "/user.slice/x"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("parseProcCgroup = %+v, %v", got, err)
	}
	// Paths may contain colons.
	got, err = parseProcCgroup("cgroup", "0::/a:b\n")
	if err != nil || got[0].path != "/a:b" {
		t.Errorf("colon path: %+v, %v", got, err)
	}
	// A malformed line is a *ParseError naming the file and the line.
	for bad, want := range map[string]string{
		"x::/\n":         `/proc/7/cgroup line 1: "x::/": hierarchy id`,
		"0::/a\n\n0:/\n": `/proc/7/cgroup line 3: "0:/": want hierarchy:controllers:path`,
		"-1::/\n":        `/proc/7/cgroup line 1: "-1::/": hierarchy id`,
	} {
		_, err := parseProcCgroup("/proc/7/cgroup", bad)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("parseProcCgroup(%q) = %v, want a *ParseError starting %q", bad, err, want)
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

func FuzzParseProcCgroup(f *testing.F) {
	f.Add("12:cpu,cpuacct:/a\n0::/x\n")
	f.Fuzz(func(t *testing.T, s string) {
		lines, err := parseProcCgroup("cgroup", s)
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
