package harness

import (
	"fmt"
	"io/fs"
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
