package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/kernfile"
)

// The file readers: one parser per file format, for both layouts, used by this
// package's Group methods and by everyone else who reads a cgroup or /proc memory
// file (pressure's headroom, cgroup/cgroupmetrics). A malformed line is always a
// [*ParseError] naming the file and the line.
//
//	format                 files                                                 reader
//	one integer            memory.current, memory.usage_in_bytes, memory.peak,   ReadInt
//	                       memory.max_usage_in_bytes, memory.failcnt,
//	                       pids.current, cpuacct.usage
//	a limit                memory.max, memory.high, memory.limit_in_bytes,        ReadLimit
//	                       memory.soft_limit_in_bytes, pids.max
//	"key value" lines      memory.stat, memory.events, memory.oom_control,        ReadKeyed, ReadMemoryStat
//	                       cpu.stat, pids.events, /proc/vmstat
//	"Key: N kB" lines      /proc/meminfo, /proc/<pid>/status                      ReadProcSizes
//	PSI                    <resource>.pressure, /proc/pressure/<resource>        ReadPSI, ParsePSI

// ParseError is a malformed cgroup or /proc file: which file, which line, what it
// said and what is wrong with it (File, Line, Text, Err). It is
// internal/kernfile's, which parses the /proc files that packages below this one
// need too.
type ParseError = kernfile.ParseError

// ReadInt reads a file that holds one integer (memory.current, pids.current,
// cpuacct.usage, memory.failcnt, ...).
func ReadInt(path string) (int64, error) {
	s, err := readFile(path)
	if err != nil {
		return 0, err
	}
	return parseInt(path, s)
}

func parseInt(file, s string) (int64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, &ParseError{File: file, Text: s, Err: errors.New("want an integer")}
	}
	return v, nil
}

// ReadLimit reads a limit file (memory.max, memory.high, memory.limit_in_bytes,
// pids.max, ...). limited is false for no limit: "max" (v2), a negative value, or a
// v1 value at or above 2^62 (v1 reports PAGE_COUNTER_MAX in bytes, rounded down to a
// page, for "unlimited").
func ReadLimit(path string) (v int64, limited bool, err error) {
	s, err := readFile(path)
	if err != nil {
		return 0, false, err
	}
	return parseLimit(path, s)
}

func parseLimit(file, s string) (v int64, limited bool, err error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, false, nil
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		if i, ierr := strconv.ParseInt(s, 10, 64); ierr == nil && i < 0 {
			return 0, false, nil // v1 files say -1 for "no limit"
		}
		return 0, false, &ParseError{File: file, Text: s, Err: errors.New(`want "max" or a number of bytes`)}
	}
	if u >= v1Unlimited {
		return 0, false, nil
	}
	return int64(u), true, nil
}

// v1Unlimited is the smallest value a v1 memory.limit_in_bytes reports when unlimited:
// PAGE_COUNTER_MAX rounded down to a page is 0x7FFFFFFFFFFFF000 on 64-bit kernels with
// 4 KiB pages, and larger pages only make it smaller by a page; a limit of 2^62 bytes or
// more is treated as no limit.
const v1Unlimited = 1 << 62

// ReadKeyed reads a flat-keyed file: one "key value" pair per line, the value an
// unsigned integer (memory.stat, memory.events, memory.oom_control, cpu.stat,
// pids.events, /proc/vmstat). Empty lines are skipped; any other line that is not a
// key and an unsigned integer is a [*ParseError].
func ReadKeyed(path string) (map[string]uint64, error) {
	s, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parseKeyed(path, s)
}

func parseKeyed(file, text string) (map[string]uint64, error) {
	m := make(map[string]uint64)
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, &ParseError{File: file, Line: n, Text: line, Err: errors.New(`want "key value"`)}
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, &ParseError{File: file, Line: n, Text: line, Err: fmt.Errorf("%s: want an unsigned integer", f[0])}
		}
		m[f[0]] = v
	}
	return m, nil
}

// MemoryStat is a group's memory.stat. Its counters are hierarchical (the group and
// its descendants) on v2; on v1 [MemoryStat.Get] reads the hierarchical total_ keys.
type MemoryStat struct {
	// V2 is true for a cgroup2 memory.stat, false for a v1 one.
	V2 bool
	// Values are the file's counters under the kernel's names.
	Values map[string]uint64
}

// ReadMemoryStat reads a memory.stat file of the given layout (v2 true: cgroup2).
func ReadMemoryStat(path string, v2 bool) (MemoryStat, error) {
	m, err := ReadKeyed(path)
	if err != nil {
		return MemoryStat{}, err
	}
	return MemoryStat{V2: v2, Values: m}, nil
}

// Get returns a hierarchical counter by its cgroup2 name ("anon", "file", "shmem",
// "unevictable", "pgmajfault", "workingset_refault_file", "pgscan_kswapd", ...). On
// v1 it reads the total_ key, under v1's names for anon (total_rss) and file
// (total_cache), and the group's own key where the file has no total_ one (a root).
// ok is false when the file has no such counter.
func (s MemoryStat) Get(key string) (v uint64, ok bool) {
	if s.V2 {
		v, ok = s.Values[key]
		return v, ok
	}
	switch key {
	case "anon":
		key = "rss"
	case "file":
		key = "cache"
	}
	if v, ok = s.Values["total_"+key]; ok {
		return v, true
	}
	v, ok = s.Values[key]
	return v, ok
}

// Unreclaimable is what reclaim cannot take from the group without swap: anonymous,
// shared and unevictable memory (anon + shmem + unevictable; v1 total_rss +
// total_shmem + total_unevictable). Unevictable pages (mlocked program text, ramfs)
// cannot be reclaimed either; mlocked anonymous pages are counted in both, which errs
// on the side of the group's other processes.
func (s MemoryStat) Unreclaimable() int64 {
	var sum uint64
	for _, k := range []string{"anon", "shmem", "unevictable"} {
		v, _ := s.Get(k)
		sum += v
	}
	return int64(min(sum, math.MaxInt64))
}

// ReadProcSizes reads the "Key: N kB" lines named by keys (with their colon, e.g.
// "MemTotal:", "RssAnon:") from a /proc file such as meminfo or <pid>/status, and
// returns them in bytes, in the order asked. Each key must be present.
func ReadProcSizes(path string, keys ...string) ([]int64, error) {
	return kernfile.ReadSizes(path, keys...)
}

// Stall is one line of a PSI file: the share of time some (or all) tasks were
// stalled, averaged over 10, 60 and 300 seconds, in percent, and the total stall
// time since boot (or since the cgroup was created).
type Stall struct {
	// Avg10, Avg60 and Avg300 are percentages in [0, 100].
	Avg10, Avg60, Avg300 float64
	// Total is the cumulative stall time.
	Total time.Duration
}

// PSI is the content of a pressure file.
type PSI struct {
	// Some is the "some" line: at least one task stalled.
	Some Stall
	// Full is the "full" line: all non-idle tasks stalled at once.
	// It is absent on some kernels' cpu files; HasFull says whether it was present.
	Full Stall
	// HasFull reports whether a "full" line was present.
	HasFull bool
}

// ErrNoPSI is returned (wrapped) when the kernel offers no PSI: the file is
// missing or reading it fails with EOPNOTSUPP (a kernel built with
// PSI_DEFAULT_DISABLED and booted without psi=1).
var ErrNoPSI = errors.New("PSI not available")

// ReadPSI reads and parses a PSI file: a group's <resource>.pressure or
// /proc/pressure/<resource>. A missing file or EOPNOTSUPP wraps [ErrNoPSI].
func ReadPSI(path string) (PSI, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errors.ErrUnsupported) {
			return PSI{}, fmt.Errorf("read %s: %w: %w", path, ErrNoPSI, err)
		}
		return PSI{}, fmt.Errorf("read %s: %w", path, err)
	}
	return ParsePSI(path, string(data))
}

// ParsePSI parses the content of a PSI file (file names it in errors):
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// The "some" line is required; "full" is optional (cpu on older kernels). Unknown
// keys on a line are ignored so that future kernels' additions do not break parsing;
// a line with any of the four known keys missing is a [*ParseError].
func ParsePSI(file, text string) (PSI, error) {
	var p PSI
	var haveSome bool
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		bad := func(err error) (PSI, error) {
			return PSI{}, &ParseError{File: file, Line: n, Text: line, Err: err}
		}
		fields := strings.Fields(line)
		var dst *Stall
		switch fields[0] {
		case "some":
			if haveSome {
				return bad(errors.New(`duplicate "some" line`))
			}
			dst, haveSome = &p.Some, true
		case "full":
			if p.HasFull {
				return bad(errors.New(`duplicate "full" line`))
			}
			dst, p.HasFull = &p.Full, true
		default:
			return bad(fmt.Errorf("unknown kind %q (want some or full)", fields[0]))
		}
		if err := parseStall(fields[1:], dst); err != nil {
			return bad(err)
		}
	}
	if !haveSome {
		return PSI{}, fmt.Errorf(`%s: no "some" line`, file)
	}
	return p, nil
}

func parseStall(fields []string, s *Stall) error {
	const (
		have10 = 1 << iota
		have60
		have300
		haveTotal
		haveAll = have10 | have60 | have300 | haveTotal
	)
	seen := 0
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("field %q is not key=value", f)
		}
		var bit int
		switch k {
		case "avg10":
			bit = have10
		case "avg60":
			bit = have60
		case "avg300":
			bit = have300
		case "total":
			bit = haveTotal
		default:
			continue
		}
		if seen&bit != 0 {
			return fmt.Errorf("duplicate key %q", k)
		}
		seen |= bit
		if bit == haveTotal {
			us, err := strconv.ParseUint(v, 10, 63)
			if err != nil {
				return fmt.Errorf("total %q: %w", v, err)
			}
			if us > uint64(1<<63-1)/uint64(time.Microsecond) {
				return fmt.Errorf("total %q overflows a duration", v)
			}
			s.Total = time.Duration(us) * time.Microsecond
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s %q: %w", k, v, err)
		}
		if !(f >= 0 && f <= 100) {
			return fmt.Errorf("%s %q: not a percentage in [0, 100]", k, v)
		}
		switch bit {
		case have10:
			s.Avg10 = f
		case have60:
			s.Avg60 = f
		case have300:
			s.Avg300 = f
		}
	}
	if seen != haveAll {
		return fmt.Errorf("missing keys (need avg10, avg60, avg300 and total)")
	}
	return nil
}
