package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

// shortOnce makes the first read of each file named in names short: n bytes.
type shortOnce struct {
	n    int
	mu   sync.Mutex
	seen map[string]bool
}

func (s *shortOnce) Open(string) error { return nil }
func (s *shortOnce) Read(path string, off int64, n int) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[path] || off != 0 {
		return Fault{}
	}
	s.seen[path] = true
	return Fault{Short: s.n}
}

// TestFilesReadPaths: a file dataset read with io_uring reads each small file
// with one chained submission (open linked to read) and says so in its
// ReadPaths; a file too large for a chain, the pread backend, SeparateCalls
// and DropCache without Direct read on descriptors of their own, each named
// as the reason; a short chained read is finished on a descriptor of its own
// and counted as a fallback with its reason. Every file arrives whole, once,
// in order.
func TestFilesReadPaths(t *testing.T) {
	skipUnlessChained(t)
	dir := t.TempDir()
	var paths []string
	want := map[string][]byte{}
	for i := range 40 {
		n := 1000 + 2999*i
		if i == 7 {
			n = chainLimit + 1 // read on a descriptor of its own
		}
		p, data := writeFile(t, dir, fmt.Sprintf("%02d.bin", i), n, uint64(i))
		paths = append(paths, p)
		want[p] = data
	}
	cases := []struct {
		name                      string
		opts                      ReaderOptions
		chained, fellBack, separa int64
		reason, why               string
	}{
		{"default", ReaderOptions{}, 39, 0, 1, "", ""},
		{"direct", ReaderOptions{Direct: true}, 39, 0, 1, "", ""},
		{"direct+dropcache", ReaderOptions{Direct: true, DropCache: true}, 39, 0, 1, "", ""},
		{"short-reads", ReaderOptions{Faults: &shortOnce{n: 700, seen: map[string]bool{}}}, 0, 39, 1, "", "short read (700 of"},
		{"separate-calls", ReaderOptions{SeparateCalls: true}, 0, 0, 40, "SeparateCalls", ""},
		{"dropcache-buffered", ReaderOptions{DropCache: true}, 0, 0, 40, "DropCache without Direct", ""},
		{"pread", ReaderOptions{Backend: BackendPread}, 0, 0, 40, "pread backend", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			if opts.Backend == "" {
				opts.Backend = BackendURing
			}
			opts.QueueDepth = 8
			var log bytes.Buffer
			opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
			it, err := NewFiles(paths).Samples(Options{WorldSize: 1, Workers: 2, Reader: opts})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := 0; ; i++ {
				s, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					if i != len(paths) {
						t.Fatalf("%d samples, want %d", i, len(paths))
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if s.Key != paths[i] || !bytes.Equal(s.Fields[0].Data, want[s.Key]) {
					t.Fatalf("sample %d: %s with %d bytes, want %s whole", i, filepath.Base(s.Key), len(s.Fields[0].Data), filepath.Base(paths[i]))
				}
				s.Release()
			}
			rp := it.(ReadPathReporter).ReadPaths()
			if rp.Chained != c.chained || rp.FellBack != c.fellBack || rp.Separate != c.separa {
				t.Fatalf("read paths %+v: want %d chained, %d fallen back, %d separate", rp, c.chained, c.fellBack, c.separa)
			}
			if !strings.Contains(rp.Reason, c.reason) || (c.reason == "") != (rp.Reason == "") {
				t.Fatalf("reason %q, want one naming %q", rp.Reason, c.reason)
			}
			if !strings.HasPrefix(rp.FellBackWhy, c.why) || (c.why == "") != (rp.FellBackWhy == "") {
				t.Fatalf("fallback reason %q, want %q", rp.FellBackWhy, c.why)
			}
			// A fallback is logged once per iterator, with the file and the reason.
			if n := strings.Count(log.String(), "finished on a descriptor of its own"); (c.why != "") != (n == 1) || n > 1 || (c.why != "" && !strings.Contains(log.String(), c.why)) {
				t.Fatalf("log %q: want one fallback line naming %q", log.String(), c.why)
			}
		})
	}
}

// TestChainedReadOfAMissingFile: a file removed between the listing and
// its chained open fails with ENOENT, named, without a stat of it in the
// way (the admission stat would have said so first, so the file is removed
// by the fault injector's Open, which runs just before the chain).
func TestChainedReadOfAMissingFile(t *testing.T) {
	skipUnlessChained(t)
	dir := t.TempDir()
	a, _ := writeFile(t, dir, "a.bin", 5000, 1)
	b, _ := writeFile(t, dir, "b.bin", 5000, 2)
	it, err := NewFiles([]string{a, b}).Samples(Options{WorldSize: 1, Workers: 1,
		Reader: ReaderOptions{Backend: BackendURing, Faults: removeOnOpen(b)}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	ctx := context.Background()
	s, err := it.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	_, err = it.Next(ctx)
	var re *ReadError
	if !errors.As(err, &re) || re.Path != b || re.Op != "open" || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("error %v: want the chained open of %s failing with ENOENT", err, b)
	}
}

type removeOnOpen string

func (r removeOnOpen) Open(path string) error {
	if path == string(r) {
		return os.Remove(path)
	}
	return nil
}
func (removeOnOpen) Read(string, int64, int) Fault { return Fault{} }

// skipUnlessChained skips where the io_uring reader cannot chain: a kernel
// that refuses it (kerneltest: an error under PSIFLOW_REQUIRE_KERNEL=1), or
// PSIFLOW_IO forcing the pread backend.
func skipUnlessChained(t *testing.T) {
	t.Helper()
	st := IOStatus()
	switch {
	case st.Chain:
	case st.Forced && st.Backend == BackendPread:
		t.Skipf("%s=%s: no io_uring reader to chain with", EnvIO, BackendPread)
	default:
		kerneltest.Skip(t, kerneltest.IOUring, "chained reads unavailable: %s", st.ChainReason)
	}
}
