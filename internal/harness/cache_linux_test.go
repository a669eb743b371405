//go:build linux

package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDropCache(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs, whose pages are the file and cannot be dropped", dir)
	}
	data := make([]byte, 3<<20+123) // not a whole number of pages
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, name := range []string{"a/x.jpg", "a/y.jpg", "b/z.jpg"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	listed, err := DataFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 4 {
		t.Fatalf("DataFiles found %v, want the 4 files", listed)
	}
	// Freshly written data is in the cache (dirty or written back).
	cached, total, err := CachedBytes(listed)
	if err != nil {
		t.Fatal(err)
	}
	if total != 3*int64(len(data)) {
		t.Errorf("total %d, want %d", total, 3*len(data))
	}
	if cached < total/2 {
		t.Fatalf("only %d of %d bytes cached after writing; cannot test dropping", cached, total)
	}
	if err := DropCache(listed); err != nil {
		t.Fatal(err)
	}
	cached, _, err = CachedBytes(listed)
	if err != nil {
		t.Fatal(err)
	}
	if cached > total/20 {
		t.Errorf("%d of %d bytes still cached after DropCache", cached, total)
	}
	// Warming brings the pages back, and the count sees them.
	if err := WarmCache(listed); err != nil {
		t.Fatal(err)
	}
	if cached, _, _ = CachedBytes(listed); cached < total/2 {
		t.Errorf("%d of %d bytes cached after WarmCache", cached, total)
	}
}

func TestDropCacheNamesMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone.jpg")
	err := DropCache([]string{missing})
	if err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("error %v, want not-exist", err)
	}
	if err := WarmCache([]string{missing}); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("WarmCache error %v, want not-exist", err)
	}
	if _, err := DataFiles(missing); err == nil {
		t.Fatal("DataFiles of a missing directory succeeded")
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// TestRunPrewarm checks that a file the prewarm command reads is not charged to the run
// that reads it next, while the same run without it pays for the file's pages.
func TestRunPrewarm(t *testing.T) {
	o := testOptions(t)
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs, whose pages are the file and cannot be dropped", dir)
	}
	const size = 48 << 20
	lib := filepath.Join(dir, "lib.so")
	if err := os.WriteFile(lib, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	reader := fake("reader", "read")
	reader.Argv = append(reader.Argv, lib)
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skipf("no cat to prewarm with: %v", err)
	}
	prewarm := []string{cat, lib}
	for _, tc := range []struct {
		name             string
		prewarm          []string
		minPeak, maxPeak int64
	}{
		{"without", nil, size * 9 / 10, 1 << 40},
		{"with", prewarm, 0, size / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Cold files: nothing of lib is cached when the prewarm (if any) starts.
			if err := DropCache([]string{lib}); err != nil {
				t.Fatal(err)
			}
			o := o
			o.Prewarm = tc.prewarm
			res, err := Run(context.Background(), reader, o)
			skipNoMemoryController(t, err)
			assertRemoved(t, res.Group)
			if res.Outcome != Finished {
				t.Fatalf("outcome %s (%s), want finished", res.Outcome, res.Detail)
			}
			if res.PeakBytes < tc.minPeak || res.PeakBytes > tc.maxPeak {
				t.Errorf("peak %d MiB (%s), want between %d and %d MiB for a %d MiB file", res.PeakBytes>>20, res.PeakSource,
					tc.minPeak>>20, tc.maxPeak>>20, size>>20)
			}
		})
	}
}

func TestPrewarmFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		want string
	}{
		{"empty", nil, "empty command"},
		{"missing", []string{"/nonexistent/prewarm"}, "/nonexistent/prewarm"},
		{"status", []string{"sh", "-c", "echo no torch >&2; exit 3"}, "no torch"},
		{"timeout", []string{"sleep", "10"}, "did not end within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Prewarm(context.Background(), tc.argv, 200*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prewarm(%q) = %v, want an error containing %q", tc.argv, err, tc.want)
			}
		})
	}
}
