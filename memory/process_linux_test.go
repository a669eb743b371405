//go:build linux

package memory

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func init() {
	helpers["oom"] = oomHelper
	helpers["release-text"] = releaseTextHelper
}

// oomHelper makes the process the preferred OOM victim and prints the old score
// and the new one.
func oomHelper() int {
	old, err := PreferOOMVictim()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %s", old, b)
	return 0
}

// releaseTextHelper locks the program text, releases it and prints the resident
// file bytes before, the bytes freed, the resident bytes after and those locked.
func releaseTextHelper() int {
	if _, err := LockProgramText(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	before := residentFile()
	freed, err := ReleaseProgramText()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %d %d %d", before, freed, residentFile(), lockedBytes())
	return 0
}

// PreferOOMVictim, in a child so the test process keeps its own score.
func TestPreferOOMVictim(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=oom")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[1] != "1000" {
		t.Fatalf("helper printed %q, want the old score and 1000", out)
	}
}

func TestLockProgramText(t *testing.T) {
	n, err := LockProgramText()
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EAGAIN) {
		t.Skipf("the host refuses to lock %d bytes of program text: %v", n, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 {
		t.Fatal("no mapping of the program found to lock")
	}
	// The locked pages show up in VmLck as they are faulted in.
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "VmLck:") {
			if strings.Fields(line)[1] == "0" {
				t.Fatalf("VmLck 0 after locking %d bytes of text", n)
			}
			return
		}
	}
	t.Fatal("no VmLck line in /proc/self/status")
}

// lockedBytes returns VmLck of /proc/self/status in bytes.
func lockedBytes() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmLck:"); ok {
			v, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return v << 10
		}
	}
	return -1
}

// ReleaseProgramText, in a child run from a clean (written back) copy of the test
// binary: a freshly linked binary's pages are dirty, and dirty pages are not
// dropped at once. The child locks its text, releases it, and reports: its
// resident file pages must fall by most of what it freed, and its mappings must be
// locked again (as faulted in from then on).
func TestReleaseProgramText(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	clean := filepath.Join(t.TempDir(), "memory.test")
	if err := copyFile(exe, clean); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(clean, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=release-text")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && (strings.Contains(string(ee.Stderr), "operation not permitted") || strings.Contains(string(ee.Stderr), "cannot allocate memory")) {
		t.Skipf("the host refuses to lock program text: %s", ee.Stderr)
	}
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	var before, freed, after, locked int64
	if _, err := fmt.Sscan(string(out), &before, &freed, &after, &locked); err != nil {
		t.Fatalf("helper printed %q: %v", out, err)
	}
	t.Logf("resident file pages %d KiB → %d KiB (freed %d KiB), VmLck %d KiB", before>>10, after>>10, freed>>10, locked>>10)
	if freed < 1<<20 || after > before-freed/2 {
		t.Errorf("resident file pages %d → %d bytes, freed %d: want at least 1 MiB dropped", before, after, freed)
	}
	if locked <= 0 {
		t.Errorf("VmLck %d after the release: want the mappings locked again as faulted in", locked)
	}
}

// copyFile copies src to dst (executable) and writes it back to the disk.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ProgramTextResident counts what smaps says the program's read-only file
// mappings hold resident (Rss of each), within what faults in between the reads.
func TestProgramTextResident(t *testing.T) {
	got, err := ProgramTextResident()
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := programMappings()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var want, size int64
	in := false
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = false
			lo, hi, _ := strings.Cut(f[0], "-")
			start, _ := strconv.ParseUint(lo, 16, 64)
			end, _ := strconv.ParseUint(hi, 16, 64)
			for _, r := range ranges {
				if uint64(r.Start) == start && uint64(r.End) == end {
					in = true
					size += int64(r.End - r.Start)
				}
			}
			continue
		}
		if in && f[0] == "Rss:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			want += v << 10
		}
	}
	t.Logf("program text resident: %d KiB by pagemap, %d KiB by smaps, of %d KiB mapped", got>>10, want>>10, size>>10)
	if want <= 0 || size <= 0 {
		t.Fatalf("smaps names no resident program mapping (%d of %d bytes)", want, size)
	}
	if got <= 0 || got > size || got < want-(1<<20) || got > want+(1<<20) {
		t.Fatalf("ProgramTextResident = %d bytes; smaps says %d resident of %d mapped", got, want, size)
	}
}
