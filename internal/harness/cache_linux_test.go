//go:build linux

package harness

import (
	"os"
	"path/filepath"
	"testing"

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
