package source

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Classes is ImageFolder's labelling of a dataset folder, as
// torchvision.datasets.ImageFolder numbers it: every directory directly under
// the root (a symbolic link to one too) is a class, numbered from 0 in sorted
// name order, and a file's label is the index of the class directory it is
// under. Files directly in the root belong to no class: [Classes.Members]
// leaves them out, as torchvision does. A root without any class directory
// (a flat folder of images) is not labelled: every file is a member, with
// label -1.
type Classes struct {
	root  string
	names []string
	index map[string]int64
}

// ClassIndex reads the class directories of root.
func ClassIndex(root string) (*Classes, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("source: class folders: %w", err)
	}
	c := &Classes{root: root, index: map[string]int64{}}
	for _, e := range entries {
		if e.IsDir() {
			c.names = append(c.names, e.Name())
		} else if e.Type()&os.ModeSymlink != 0 { // a symlinked class folder is a class too
			if st, err := os.Stat(filepath.Join(root, e.Name())); err == nil && st.IsDir() {
				c.names = append(c.names, e.Name())
			}
		}
	}
	sort.Strings(c.names)
	for i, name := range c.names {
		c.index[name] = int64(i)
	}
	return c, nil
}

// Names lists the classes in label order (empty for a flat folder).
func (c *Classes) Names() []string { return append([]string(nil), c.names...) }

// Label returns the class index of path, a file under the root, or -1 when it
// is not under a class directory.
func (c *Classes) Label(path string) int64 {
	rel, err := filepath.Rel(c.root, path)
	if err != nil {
		return -1
	}
	first, _, ok := strings.Cut(rel, string(filepath.Separator))
	if !ok {
		return -1
	}
	if i, ok := c.index[first]; ok {
		return i
	}
	return -1
}

// Members returns the files of f under a class directory, and the paths of
// those that are not (files directly in the root), in order. For a flat
// folder every file is a member. When f has files but none is a member, the
// error says so, naming the root.
func (c *Classes) Members(f *Files) (members *Files, outside []string, err error) {
	if len(c.names) == 0 {
		return f, nil, nil
	}
	kept := make([]string, 0, f.Len())
	for _, p := range f.paths {
		if c.Label(p) >= 0 {
			kept = append(kept, p)
		} else {
			outside = append(outside, p)
		}
	}
	if len(kept) == 0 && f.Len() > 0 {
		return nil, outside, fmt.Errorf("%w: %s has %d class folders (%s) but none of its %d files is in one (ImageFolder layout: ROOT/CLASS/FILE)",
			ErrEmptyDataset, c.root, len(c.names), strings.Join(c.names[:min(3, len(c.names))], ", "), f.Len())
	}
	return &Files{paths: kept}, outside, nil
}

// OutsideNotice is the one line that says which files [Classes.Members] left
// out ("" when none): how many, and the first of them.
func (c *Classes) OutsideNotice(outside []string) string {
	if len(outside) == 0 {
		return ""
	}
	return fmt.Sprintf("skipped %d files directly in %s, outside every class folder (ImageFolder reads ROOT/CLASS/FILE, as torchvision does), e.g. %s",
		len(outside), c.root, filepath.Base(outside[0]))
}
