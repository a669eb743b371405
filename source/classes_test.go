package source

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// imageFolder writes root/NAME for every name (folders made as needed).
func imageFolder(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, n := range names {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestClassIndexLabels(t *testing.T) {
	root := imageFolder(t, "cat/1.jpg", "dog/2.jpg", "ant/3.jpg", "loose.jpg")
	c, err := ClassIndex(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Names(), []string{"ant", "cat", "dog"}) {
		t.Fatalf("classes %v, want sorted ant cat dog", c.Names())
	}
	for _, tc := range []struct {
		path string
		want int64
	}{
		{"ant/3.jpg", 0},
		{"cat/1.jpg", 1},
		{"dog/2.jpg", 2},
		{"dog/deeper/x.jpg", 2},
		{"loose.jpg", -1},
		{"other/x.jpg", -1},
	} {
		if got := c.Label(filepath.Join(root, tc.path)); got != tc.want {
			t.Errorf("Label(%s) = %d, want %d", tc.path, got, tc.want)
		}
	}
}

func TestClassIndexFollowsSymlinkedClasses(t *testing.T) {
	root := imageFolder(t, "a/1.jpg", "b/2.jpg")
	elsewhere := imageFolder(t, "3.jpg")
	if err := os.Symlink(elsewhere, filepath.Join(root, "c")); err != nil {
		t.Fatal(err)
	}
	c, err := ClassIndex(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Label(filepath.Join(root, "c", "3.jpg")); got != 2 {
		t.Fatalf("label in a symlinked class folder = %d, want 2", got)
	}
}

// Files directly in the root are left out with one notice; a flat folder
// keeps every file, unlabelled; a root whose files are all outside its
// classes is an empty dataset.
func TestClassesMembers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		members int
		outside int
		err     string
	}{
		{"imagefolder", []string{"a/1.jpg", "a/2.jpg", "b/3.jpg"}, 3, 0, ""},
		{"root files skipped", []string{"a/1.jpg", "b/2.jpg", "x.jpg", "y.jpg"}, 2, 2, ""},
		{"flat folder", []string{"1.jpg", "2.jpg"}, 2, 0, ""},
		{"nothing in a class", []string{"1.jpg", "empty/.keep"}, 0, 1, "none of its 1 files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := imageFolder(t, tc.files...)
			files, err := Dir(root, ".jpg")
			if err != nil {
				t.Fatal(err)
			}
			c, err := ClassIndex(root)
			if err != nil {
				t.Fatal(err)
			}
			m, outside, err := c.Members(files)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrEmptyDataset) {
					t.Fatalf("Members: %v, want ErrEmptyDataset and %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Len() != tc.members || len(outside) != tc.outside {
				t.Fatalf("%d members, %d outside; want %d and %d", m.Len(), len(outside), tc.members, tc.outside)
			}
			notice := c.OutsideNotice(outside)
			if (notice != "") != (tc.outside > 0) || (tc.outside > 0 && !strings.Contains(notice, "skipped 2 files directly in "+root)) {
				t.Fatalf("notice %q", notice)
			}
		})
	}
}

func TestClassIndexMissingRoot(t *testing.T) {
	if _, err := ClassIndex(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "none") {
		t.Fatalf("ClassIndex of a missing folder: %v", err)
	}
}
