package source

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func touch(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func rel(t *testing.T, root string, paths []string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		r, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestDirSymlinksAndCase(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	elsewhere := filepath.Join(base, "elsewhere")
	touch(t, filepath.Join(data, "a", "1.jpg"))
	touch(t, filepath.Join(data, "a", "2.JPG"))
	touch(t, filepath.Join(data, "a", "3.Png"))
	touch(t, filepath.Join(data, "a", "notes.txt"))
	touch(t, filepath.Join(elsewhere, "b", "4.jpeg"))
	touch(t, filepath.Join(elsewhere, "5.JPEG"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(elsewhere, "b"), filepath.Join(data, "b")))                // symlinked class folder
	must(os.Symlink(filepath.Join(elsewhere, "5.JPEG"), filepath.Join(data, "a", "5.JPEG"))) // symlinked file
	must(os.Symlink(filepath.Join(data, "a"), filepath.Join(data, "c")))                     // a second way to a folder
	must(syscall.Mkfifo(filepath.Join(data, "a", "pipe.jpg"), 0o644))                        // never read: it would block
	link := filepath.Join(base, "link")
	must(os.Symlink(data, link)) // symlinked root

	for _, root := range []string{data, link} {
		d, err := Dir(root, ".jpg", ".jpeg", ".png")
		if err != nil {
			t.Fatal(err)
		}
		got := rel(t, root, d.Paths())
		want := []string{"a/1.jpg", "a/2.JPG", "a/3.Png", "a/5.JPEG", "b/4.jpeg"}
		if !slices.Equal(got, want) {
			t.Fatalf("Dir(%s) = %v, want %v", root, got, want)
		}
		paths := d.Paths()
		if d.Len() != len(paths) || d.Path(0) != paths[0] || d.Path(d.Len()-1) != paths[len(paths)-1] {
			t.Fatalf("Dir(%s): Len %d, Path(0) %q, Path(last) %q disagree with Paths %v", root, d.Len(), d.Path(0), d.Path(d.Len()-1), paths)
		}
	}
}

func TestDirSymlinkLoop(t *testing.T) {
	root := t.TempDir()
	touch(t, filepath.Join(root, "a", "1.jpg"))
	if err := os.Symlink("..", filepath.Join(root, "a", "up")); err != nil {
		t.Fatal(err)
	}
	_, err := Dir(root, ".jpg")
	if err == nil || !strings.Contains(err.Error(), "loop") || !strings.Contains(err.Error(), filepath.Join(root, "a", "up")) {
		t.Fatalf("error %v: want a loop naming the link", err)
	}
	if err := os.Remove(filepath.Join(root, "a", "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(root, "a", "dangling.jpg")); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(root, ".jpg"); err == nil || !strings.Contains(err.Error(), "dangling.jpg") {
		t.Fatalf("error %v: want the dangling link named", err)
	}
}

func TestDirEmpty(t *testing.T) {
	empty := t.TempDir()
	other := t.TempDir()
	touch(t, filepath.Join(other, "x", "a.txt"))
	touch(t, filepath.Join(other, "x", "b.txt"))
	touch(t, filepath.Join(other, "README"))
	for _, c := range []struct{ root, mention string }{
		{empty, "found 0 files"},
		{other, "2 .txt"},
		{"/dev/null", "not a folder"},
		{filepath.Join(empty, "missing"), "no such file"},
	} {
		_, err := Dir(c.root, ".jpg", ".JPEG", ".png")
		if err == nil || !strings.Contains(err.Error(), c.mention) || !strings.Contains(err.Error(), c.root) {
			t.Fatalf("Dir(%s): %v, want an error naming it and saying %q", c.root, err, c.mention)
		}
		if c.root == other && (!errors.Is(err, ErrEmptyDataset) || !strings.Contains(err.Error(), ".jpg, .jpeg, .png")) {
			t.Fatalf("Dir(%s): %v: want ErrEmptyDataset saying what was looked for", c.root, err)
		}
	}
}

func TestEnvShardingAndLocalRank(t *testing.T) {
	for _, c := range []struct {
		rank, world, local string
		want               Sharding
		bad                bool
	}{
		{"", "", "", Sharding{WorldSize: 1}, false},
		{"3", "8", "1", Sharding{Rank: 3, WorldSize: 8, FromEnv: true}, false},
		{"8", "8", "", Sharding{}, true},
		{"-1", "8", "", Sharding{}, true},
		{"0", "0", "", Sharding{}, true},
		{"x", "2", "", Sharding{}, true},
		{"0", "2", "gpu0", Sharding{}, true},
	} {
		t.Setenv("RANK", c.rank)
		t.Setenv("WORLD_SIZE", c.world)
		t.Setenv("LOCAL_RANK", c.local)
		sh, err := EnvSharding()
		_, lerr := LocalRank()
		if c.bad {
			if err == nil && lerr == nil {
				t.Errorf("RANK=%q WORLD_SIZE=%q LOCAL_RANK=%q accepted", c.rank, c.world, c.local)
			}
			continue
		}
		if err != nil || lerr != nil || sh != c.want {
			t.Errorf("RANK=%q WORLD_SIZE=%q: %+v, %v, %v; want %+v", c.rank, c.world, sh, err, lerr, c.want)
		}
	}
	if s := (Sharding{Rank: 1, WorldSize: 4, FromEnv: true}).String(); !strings.Contains(s, "rank 1 of 4") {
		t.Errorf("String() = %q", s)
	}
}
