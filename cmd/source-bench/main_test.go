//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestResidentCountsOnlyCachedPages(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	var want int64
	for i, n := range []int{1, 4096, 4097, 110_000} {
		p := filepath.Join(dir, string(rune('a'+i)))
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		want += (int64(n) + 4095) / 4096 * 4096
	}
	unix.Sync() // dirty pages cannot be dropped
	if got := resident(paths); got != want {
		t.Fatalf("resident %d after reading, want %d", got, want)
	}
	dropCache(paths)
	if got := resident(paths); got > want/2 {
		t.Fatalf("resident %d after dropping the cache of %d bytes", got, want)
	}
}

func TestResidentAfterDatasetPass(t *testing.T) {
	dir := t.TempDir()
	paths, total, err := writeSmall(dir, 64)
	if err != nil {
		t.Fatal(err)
	}
	dropCache(paths)
	if _, _, _, err := readFiles(paths, "", 2, 8, false, false, false, false); err != nil {
		t.Fatal(err)
	}
	max := total + int64(len(paths))*4096
	if got := resident(paths); got > max || got < total/2 {
		t.Fatalf("resident %d after a pass over %d bytes (at most %d)", got, total, max)
	}
	dropCache(paths)
	if _, _, _, err := readFiles(paths, "", 2, 8, false, true, false, false); err != nil {
		t.Fatal(err)
	}
	if got := resident(paths); got != 0 {
		t.Fatalf("resident %d after a pass with DropCache", got)
	}
}
