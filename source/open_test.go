//go:build unix

package source

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenRefusesWhatIsNotARegularFile replaces a listed file by a FIFO, a
// socket or a device node after the file list is taken: the open never blocks
// and the error names the file and what it is, for every backend and open mode.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	specials := []struct {
		name string
		kind string
		make func(t *testing.T, p string)
	}{
		{"fifo", "named pipe", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"socket", "socket", func(t *testing.T, p string) {
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
		}},
		{"char-device", "character device", func(t *testing.T, p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", "directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, b := range backends(t) {
		for _, direct := range []bool{false, true} {
			for _, sp := range specials {
				name := string(b) + "/" + sp.name
				if direct {
					name += "/direct"
				}
				t.Run(name, func(t *testing.T) {
					dir := t.TempDir()
					good, _ := writeFile(t, dir, "a.bin", 5000, 1)
					bad, _ := writeFile(t, dir, "b.bin", 5000, 2)
					ds := NewFiles([]string{good, bad}) // the list is taken
					if err := os.Remove(bad); err != nil {
						t.Fatal(err)
					}
					sp.make(t, bad)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					done := make(chan error, 1)
					go func() {
						it, err := ds.Samples(Options{WorldSize: 1, Reader: ReaderOptions{Backend: b, Direct: direct}})
						if err != nil {
							done <- err
							return
						}
						defer it.Close()
						for {
							s, err := it.Next(ctx)
							if err != nil {
								done <- err
								return
							}
							s.Release()
						}
					}()
					var err error
					select {
					case err = <-done:
					case <-ctx.Done():
						t.Fatalf("reading a %s blocked", sp.kind)
					}
					var re *ReadError
					if !errors.As(err, &re) || re.Path != bad || !errors.Is(err, ErrNotRegular) {
						t.Fatalf("error %v, want a ReadError naming %s as not a regular file", err, bad)
					}
					if !strings.Contains(err.Error(), sp.kind) || !strings.Contains(err.Error(), bad) {
						t.Fatalf("error %q does not say %q and name %s", err, sp.kind, bad)
					}
				})
			}
		}
	}
}

// TestOpenReadsRegularFilesThroughSymlinks keeps what works: a symlink to a
// regular file is read as that file.
func TestOpenReadsRegularFilesThroughSymlinks(t *testing.T) {
	dir := t.TempDir()
	p, data := writeFile(t, dir, "a.bin", 7000, 3)
	link := filepath.Join(dir, "link.bin")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends(t) {
		r, err := NewReader(ReaderOptions{Backend: b})
		if err != nil {
			t.Fatal(err)
		}
		f, err := r.Open(link)
		if err != nil {
			t.Fatal(err)
		}
		if f.Size != int64(len(data)) {
			t.Fatalf("%s: size %d, want %d", b, f.Size, len(data))
		}
		f.Close()
		r.Close()
	}
}
