package pressure

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

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

// Parse parses the content of a PSI file such as /proc/pressure/memory or a cgroup's
// memory.pressure:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// The "some" line is required; "full" is optional (cpu on older kernels). Unknown
// keys on a line are ignored so that future kernels' additions do not break parsing;
// a line with any of the four known keys missing is an error.
func Parse(data []byte) (PSI, error) {
	var p PSI
	var haveSome bool
	for lineNo := 1; len(data) > 0; lineNo++ {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		fields := bytes.Fields(line)
		var dst *Stall
		switch string(fields[0]) {
		case "some":
			if haveSome {
				return PSI{}, fmt.Errorf("psi line %d: duplicate \"some\" line", lineNo)
			}
			dst, haveSome = &p.Some, true
		case "full":
			if p.HasFull {
				return PSI{}, fmt.Errorf("psi line %d: duplicate \"full\" line", lineNo)
			}
			dst, p.HasFull = &p.Full, true
		default:
			return PSI{}, fmt.Errorf("psi line %d: unknown kind %q (want some or full)", lineNo, fields[0])
		}
		if err := parseStall(fields[1:], dst); err != nil {
			return PSI{}, fmt.Errorf("psi line %d (%s): %w", lineNo, fields[0], err)
		}
	}
	if !haveSome {
		return PSI{}, errors.New("psi: no \"some\" line")
	}
	return p, nil
}

func parseStall(fields [][]byte, s *Stall) error {
	const (
		have10 = 1 << iota
		have60
		have300
		haveTotal
		haveAll = have10 | have60 | have300 | haveTotal
	)
	seen := 0
	for _, f := range fields {
		k, v, ok := bytes.Cut(f, []byte{'='})
		if !ok {
			return fmt.Errorf("field %q is not key=value", f)
		}
		var bit int
		switch string(k) {
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
			us, err := strconv.ParseUint(string(v), 10, 63)
			if err != nil {
				return fmt.Errorf("total %q: %w", v, err)
			}
			if us > uint64(1<<63-1)/uint64(time.Microsecond) {
				return fmt.Errorf("total %q overflows a duration", v)
			}
			s.Total = time.Duration(us) * time.Microsecond
			continue
		}
		f, err := strconv.ParseFloat(string(v), 64)
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

// ReadPSI reads and parses a PSI file. A missing file or EOPNOTSUPP wraps [ErrNoPSI].
func ReadPSI(path string) (PSI, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || isNotSupported(err) {
			return PSI{}, fmt.Errorf("read %s: %w: %w", path, ErrNoPSI, err)
		}
		return PSI{}, fmt.Errorf("read %s: %w", path, err)
	}
	p, err := Parse(data)
	if err != nil {
		return PSI{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return p, nil
}

// SystemPressurePath returns the system-wide PSI file of a resource
// ("memory", "io" or "cpu"), e.g. /proc/pressure/memory.
func SystemPressurePath(resource string) string { return "/proc/pressure/" + resource }
