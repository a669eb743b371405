package kernfile

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// ParseError is a malformed kernel file: which file, which line, what it said and
// what is wrong with it.
type ParseError struct {
	// File is the path read (or the name given to a parser).
	File string
	// Line is the 1-based line; 0 for a file that holds one value.
	Line int
	// Text is the offending line or value, trimmed.
	Text string
	// Err says what is wrong.
	Err error
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s line %d: %q: %v", e.File, e.Line, e.Text, e.Err)
	}
	return fmt.Sprintf("%s: %q: %v", e.File, e.Text, e.Err)
}

// Unwrap returns what is wrong (a *strconv.NumError, for example).
func (e *ParseError) Unwrap() error { return e.Err }

// ReadSizes reads the "Key: N kB" lines named by keys (with their colon, e.g.
// "MemTotal:", "RssAnon:", "VmSize:") from a /proc file such as meminfo or
// <pid>/status, and returns them in bytes, in the order asked. Each key must be
// present.
func ReadSizes(path string, keys ...string) ([]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err // an *fs.PathError: it names the file
	}
	return ParseSizes(path, string(b), keys...)
}

// ParseSizes is [ReadSizes] on the content of a file (file names it in errors).
func ParseSizes(file, text string, keys ...string) ([]int64, error) {
	out := make([]int64, len(keys))
	found := make([]bool, len(keys))
	n := 0
	for line := range strings.Lines(text) {
		n++
		for i, k := range keys {
			rest, ok := strings.CutPrefix(line, k)
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			bad := func(why string) error {
				return &ParseError{File: file, Line: n, Text: strings.TrimSpace(line), Err: errors.New(why)}
			}
			if len(f) == 0 || len(f) > 2 || len(f) == 2 && f[1] != "kB" {
				return nil, bad(`want "` + k + ` N kB"`)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || kb < 0 || kb > math.MaxInt64>>10 {
				return nil, bad("want a number of kB")
			}
			out[i], found[i] = kb<<10, true
		}
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("%s: no %s line", file, keys[i])
		}
	}
	return out, nil
}

// ReadCapEff returns the effective capability mask (the "CapEff:" line, hexadecimal)
// of a /proc/<pid>/status file; bit n is capability n of linux/capability.h.
func ReadCapEff(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err // an *fs.PathError: it names the file
	}
	return ParseCapEff(path, string(b))
}

// ParseCapEff is [ReadCapEff] on the content of a file (file names it in errors).
func ParseCapEff(file, text string) (uint64, error) {
	n := 0
	for line := range strings.Lines(text) {
		n++
		rest, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		v := strings.TrimSpace(rest)
		mask, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			return 0, &ParseError{File: file, Line: n, Text: strings.TrimSpace(line), Err: errors.New("want a hexadecimal capability mask")}
		}
		return mask, nil
	}
	return 0, fmt.Errorf("%s: no CapEff line", file)
}

// Mapping is one line of /proc/<pid>/maps: an address range, its permissions
// ("r-xp") and the file mapped there ("" for anonymous memory; "[heap]", "[stack]"
// and the like for the kernel's named areas).
type Mapping struct {
	// Start and End bound the range [Start, End).
	Start, End uintptr
	// Perms is the permission field: read, write, execute, private or shared.
	Perms string
	// Path is the mapped file, or the area's name, or "".
	Path string
}

// Writable reports whether the mapping may be written.
func (m Mapping) Writable() bool { return strings.Contains(m.Perms, "w") }

// ReadMaps reads a /proc/<pid>/maps file.
func ReadMaps(path string) ([]Mapping, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err // an *fs.PathError: it names the file
	}
	return ParseMaps(path, string(b))
}

// ParseMaps is [ReadMaps] on the content of a file (file names it in errors):
//
//	00400000-0045c000 r-xp 00000000 08:01 1234       /usr/bin/psiflow
func ParseMaps(file, text string) ([]Mapping, error) {
	var out []Mapping
	n := 0
	for line := range strings.Lines(text) {
		n++
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(why string) error {
			return &ParseError{File: file, Line: n, Text: strings.TrimSpace(line), Err: errors.New(why)}
		}
		if len(f) < 5 {
			return nil, bad("want address perms offset dev inode [path]")
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, bad("want an address range start-end")
		}
		start, err1 := strconv.ParseUint(lo, 16, strconv.IntSize)
		end, err2 := strconv.ParseUint(hi, 16, strconv.IntSize)
		if err1 != nil || err2 != nil || end < start {
			return nil, bad("want an address range start-end in hexadecimal")
		}
		out = append(out, Mapping{Start: uintptr(start), End: uintptr(end), Perms: f[1], Path: strings.Join(f[5:], " ")})
	}
	return out, nil
}
