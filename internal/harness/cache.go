package harness

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// DataFiles returns the regular files under dir (recursively, symbolic links not
// followed), sorted: the list to pass as Options.Data.
func DataFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("harness: list data %s: %w", dir, err)
	}
	slices.Sort(out)
	return out, nil
}

// WarmCache reads every file through once, so that its pages are in the page cache
// (charged to the caller's cgroup). Pages may be reclaimed again later: under memory
// pressure, or by a host's proactive reclaim (DAMON on the project's machines evicts
// unmapped file pages after about a minute), so warm right before each run.
func WarmCache(paths []string) error {
	buf := make([]byte, 1<<20)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("harness: warm cache: %w", err)
		}
		for {
			_, err = f.Read(buf)
			if err != nil {
				break
			}
		}
		f.Close()
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("harness: warm cache: read %s: %w", p, err)
		}
	}
	return nil
}
