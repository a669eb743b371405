package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrEmptyDataset is wrapped by the error [Dir] returns when it finds no file to read.
var ErrEmptyDataset = errors.New("source: empty dataset")

// Dir returns a dataset of the regular files under root (recursively, in
// lexical order) whose names end with one of exts, compared without regard
// to case (".jpg" matches "x.JPG"); all files when exts is empty.
//
// Symbolic links are followed: root itself, folders and files. A link to a
// folder that is one of its own ancestors is a loop and an error naming it;
// a folder reached a second time through another link is read once. Other
// kinds of file (devices, FIFOs, sockets) are not read. A dangling link is an
// error naming it. When nothing matches, the error wraps [ErrEmptyDataset]
// and says what was looked for, where, and what was found instead.
func Dir(root string, exts ...string) (*Files, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("source: dataset folder: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("source: dataset folder %s is not a folder (%s)", root, st.Mode().Type())
	}
	w := &dirWalk{exts: exts, seen: map[fileID]bool{}, others: map[string]int{}}
	if err := w.walk(root, st, nil); err != nil {
		return nil, err
	}
	if len(w.paths) == 0 {
		return nil, w.emptyError(root)
	}
	return &Files{paths: w.paths}, nil
}

type fileID struct{ dev, ino uint64 }

type dirWalk struct {
	exts    []string
	paths   []string
	seen    map[fileID]bool // folders read
	files   int             // regular files looked at
	special int             // devices, FIFOs, sockets
	others  map[string]int  // extensions of files that did not match
}

// walk reads dir (whose info is st) unless it was read already; ancestors
// are the folders above it, for loop detection.
func (w *dirWalk) walk(dir string, st fs.FileInfo, ancestors []fileID) error {
	id, ok := idOf(st)
	if ok {
		if slices.Contains(ancestors, id) {
			return fmt.Errorf("source: symlink loop: %s leads back to a folder above it", dir)
		}
		if w.seen[id] {
			return nil
		}
		w.seen[id] = true
		ancestors = append(ancestors, id)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("source: listing %s: %w", dir, err)
	}
	for _, e := range entries { // ReadDir sorts by name
		p := filepath.Join(dir, e.Name())
		mode := e.Type()
		var fi fs.FileInfo
		if mode&fs.ModeSymlink != 0 {
			if fi, err = os.Stat(p); err != nil {
				return fmt.Errorf("source: symlink %s: %w", p, err)
			}
			mode = fi.Mode().Type()
		}
		switch {
		case mode.IsDir():
			if fi == nil {
				if fi, err = e.Info(); err != nil {
					return fmt.Errorf("source: listing %s: %w", p, err)
				}
			}
			if err := w.walk(p, fi, ancestors); err != nil {
				return err
			}
		case mode.IsRegular():
			w.files++
			if w.match(p) {
				w.paths = append(w.paths, p)
			} else {
				ext := strings.ToLower(filepath.Ext(p))
				if ext == "" {
					ext = "(no extension)"
				}
				w.others[ext]++
			}
		default:
			w.special++
		}
	}
	return nil
}

func (w *dirWalk) match(p string) bool {
	if len(w.exts) == 0 {
		return true
	}
	return slices.ContainsFunc(w.exts, func(e string) bool {
		return len(p) >= len(e) && strings.EqualFold(p[len(p)-len(e):], e)
	})
}

func (w *dirWalk) emptyError(root string) error {
	want := "any file"
	if len(w.exts) > 0 {
		var lower []string
		for _, e := range w.exts {
			if l := strings.ToLower(e); !slices.Contains(lower, l) {
				lower = append(lower, l)
			}
		}
		want = "files ending in " + strings.Join(lower, ", ") + " (any case)"
	}
	found := fmt.Sprintf("%d files, %d folders", w.files, len(w.seen))
	if len(w.others) > 0 {
		var kinds []string
		for ext, n := range w.others {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, ext))
		}
		slices.Sort(kinds)
		if len(kinds) > 5 {
			kinds = append(kinds[:5], "...")
		}
		found += " (" + strings.Join(kinds, ", ") + ")"
	}
	if w.special > 0 {
		found += fmt.Sprintf(", %d devices/FIFOs/sockets not read", w.special)
	}
	return fmt.Errorf("%w: no %s under %s; found %s", ErrEmptyDataset, want, root, found)
}
