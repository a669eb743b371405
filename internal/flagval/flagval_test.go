package flagval

import (
	"flag"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "4096": 4096, "64KiB": 64 << 10, "64k": 64 << 10, "64Ki": 64 << 10, "512MiB": 512 << 20,
		"256M": 256 << 20, "256m": 256 << 20, "2GiB": 2 << 30, "1.5G": 3 << 29, "1T": 1 << 40, "100B": 100,
		"none": None, "max": None, "-1": None, " 8G ": 8 << 30, "7E": 7 << 60, "8191P": 8191 << 50,
	}
	for s, want := range good {
		got, err := ParseSize(s)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "NaN", "nan", "Inf", "+Inf", "-Inf", "1e30", "1e3", "-5", "-1G", "9999999999G",
		"8E", "8192P", "9223372036854775808", "18446744073709551616", "99999999999999999999999", "8.0E", "1.2.3", "G", "12X", "0x10", "1_000", "--1"} {
		if got, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", s, got)
		}
	}
}

func TestFormatSizeRoundTrips(t *testing.T) {
	for _, b := range []int64{0, 1, 1000, 1024, 1536 << 10, 256 << 20, 3 << 40, math.MaxInt64, None} {
		got, err := ParseSize(formatSize(b))
		if err != nil || got != b {
			t.Errorf("%d → %q → %d, %v", b, formatSize(b), got, err)
		}
	}
}

// parse defines flags on a fresh set and parses args, returning the error text.
func parse(t *testing.T, define func(fs *flag.FlagSet), args ...string) string {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	define(fs)
	if err := fs.Parse(args); err != nil {
		return err.Error()
	}
	return ""
}

func TestFlagsNameThemselves(t *testing.T) {
	var (
		mem    int64
		high   int64
		cpus   float64
		pids   int64
		n      int
		frac   *float64
		period time.Duration
	)
	define := func(fs *flag.FlagSet) {
		SizeVar(fs, &mem, "memory-max", None, None, 1<<50, "")
		SizeVar(fs, &high, "budget", 32<<20, 1, 1<<40, "")
		FloatVar(fs, &cpus, "cpus", 0, 0, 1024, "")
		Int64Var(fs, &pids, "pids-max", -1, -1, 1<<22, "")
		IntVar(fs, &n, "workers", 1, 1, 4096, "")
		frac = Fraction(fs, "keep", 0.5, "")
		DurationVar(fs, &period, "interval", time.Second, 100*time.Millisecond, time.Hour, "")
	}
	bad := [][2]string{
		{"-memory-max", "NaN"}, {"-memory-max", "Inf"}, {"-memory-max", "1e30"}, {"-memory-max", "-7"}, {"-memory-max", "2P"},
		{"-budget", "9999999999G"}, {"-budget", "0"}, {"-budget", "none"},
		{"-cpus", "NaN"}, {"-cpus", "-1"}, {"-cpus", "1e12"}, {"-cpus", "Inf"}, {"-cpus", "1e400"},
		{"-pids-max", "-7"}, {"-pids-max", "99999999999999999999"}, {"-pids-max", "1.5"},
		{"-workers", "-1"}, {"-workers", "0"}, {"-workers", "4097"}, {"-workers", "NaN"},
		{"-keep", "1.01"}, {"-keep", "NaN"}, {"-keep", "-0.1"},
		{"-interval", "10ms"}, {"-interval", "-1s"}, {"-interval", "2h"}, {"-interval", "fast"},
	}
	for _, a := range bad {
		msg := parse(t, define, a[0], a[1])
		if msg == "" || !strings.Contains(msg, "flag "+a[0]) || !strings.Contains(msg, a[1]) && !strings.Contains(msg, "range") {
			t.Errorf("%s %s: error %q, want one naming the flag", a[0], a[1], msg)
		}
	}
	if msg := parse(t, define, "-memory-max", "max", "-budget", "1.5G", "-cpus", "1.5", "-pids-max", "100", "-workers", "8", "-keep", "1", "-interval", "250ms"); msg != "" {
		t.Fatal(msg)
	}
	if mem != None || high != 3<<29 || cpus != 1.5 || pids != 100 || n != 8 || *frac != 1 || period != 250*time.Millisecond {
		t.Fatalf("parsed %d %d %g %d %d %g %v", mem, high, cpus, pids, n, *frac, period)
	}
}

func TestRange(t *testing.T) {
	if lo, hi, err := Range("0.5:4", 0.01, 1024); err != nil || lo != 0.5 || hi != 4 {
		t.Fatalf("%g %g %v", lo, hi, err)
	}
	for _, s := range []string{"4:0.5", "NaN:1", "1:Inf", "1", "0:1", "1:1e12", ":"} {
		if _, _, err := Range(s, 0.01, 1024); err == nil {
			t.Errorf("Range(%q) accepted", s)
		}
	}
}

// FuzzParseFloat: accepted values are finite and in range.
func FuzzParseFloat(f *testing.F) {
	for _, s := range []string{"1.5", "NaN", "Inf", "-0", "1e308", "1e309", "0x1p-2", "1_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseFloat(s, -10, 1024)
		if err == nil && (math.IsNaN(v) || v < -10 || v > 1024) {
			t.Fatalf("ParseFloat(%q) = %g", s, v)
		}
	})
}
