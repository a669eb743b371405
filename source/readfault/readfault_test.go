//go:build unix

package readfault_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/readfault"
	"github.com/psiflow/psiflow/stage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func backends(t *testing.T) []source.Backend {
	bs := []source.Backend{source.BackendPread}
	if st := source.IOStatus(); st.Backend == source.BackendURing {
		bs = append(bs, source.BackendURing)
	} else {
		t.Logf("io_uring not tested here: %s", st.Reason)
	}
	return bs
}

// dataset writes files 0.bin … 5.bin of distinct sizes and contents; 2.bin
// is the large one (300 KiB: several reads of its own under short reads).
func dataset(t *testing.T) ([]string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var paths []string
	want := map[string][]byte{}
	for i := range 6 {
		n := 20000 + 1000*i
		if i == 2 {
			n = 300 << 10
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, fmt.Sprintf("%d.bin", i))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		want[p] = data
	}
	return paths, want
}

// drain reads every sample, checking each against want; it returns the keys
// delivered in order and the error that ended the iteration (nil at EOF).
func drain(t *testing.T, it source.Iterator[*source.Sample], want map[string][]byte) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var keys []string
	for {
		s, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return keys, err
		}
		if w, ok := want[s.Key]; !ok || !bytes.Equal(s.Fields[0].Data, w) {
			t.Errorf("%s: bytes differ from the file (%d vs %d bytes)", s.Key, len(s.Fields[0].Data), len(w))
		}
		keys = append(keys, s.Key)
		s.Release()
	}
}

// exactlyOnce fails unless keys holds each of wantKeys once, in that order.
func exactlyOnce(t *testing.T, keys, wantKeys []string) {
	t.Helper()
	if strings.Join(keys, "\n") != strings.Join(wantKeys, "\n") {
		t.Fatalf("delivered\n  %v\nwant each once, in order\n  %v", base(keys), base(wantKeys))
	}
}

func base(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

type budget struct{ n atomic.Int64 }

func (b *budget) Acquire(ctx context.Context, n int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.n.Add(n)
	return nil
}
func (b *budget) Release(n int64) { b.n.Add(-n) }

// TestFilesUnderFaults runs every fault under both readers, buffered and
// O_DIRECT, with the stop and the skip policies, and io_uring both with
// small files chained (open, read, close in one submission; the default)
// and with separate calls: the error names the file (and the offset where
// one applies), the faults a reader must absorb (short reads, EINTR) change
// nothing, and every sample delivered is whole and delivered once. The faults
// include files removed after the listing and files cut (or emptied) while
// they are read, after their size was taken.
func TestFilesUnderFaults(t *testing.T) {
	type tc struct {
		name string
		rule readfault.Rule
		// bad is the index of the file the fault makes unreadable (-1: none);
		// off is the offset the error must name (-1: no offset, an open); is
		// what it wraps (nil: a file cut short, said as such).
		bad int
		off int64
		is  error
	}
	cases := []tc{
		{"eio-mid-file", readfault.EIO("2.bin", 128<<10), 2, 128 << 10, syscall.EIO},
		{"eio-first-byte", readfault.EIO("4.bin", 0), 4, 0, syscall.EIO},
		{"short-reads", readfault.Short("", 5000, 40), -1, 0, nil},
		{"eintr", readfault.EINTR("", 30), -1, 0, nil},
		{"fifo-after-listing", readfault.FIFO("3.bin"), 3, -1, source.ErrNotRegular},
		{"open-eacces", readfault.Rule{Name: "1.bin", Op: readfault.Open, OpenErr: syscall.EACCES}, 1, -1, syscall.EACCES},
		{"vanished-after-listing", readfault.Vanish("3.bin"), 3, -1, syscall.ENOENT},
		{"truncated-while-read", readfault.Truncate("2.bin", 0, 100<<10), 2, 100 << 10, nil},
		{"emptied-while-read", readfault.Truncate("4.bin", 0, 0), 4, 0, nil},
	}
	type mode struct {
		b        source.Backend
		separate bool // io_uring: SeparateCalls
	}
	var modes []mode
	for _, b := range backends(t) {
		modes = append(modes, mode{b, false})
		if b == source.BackendURing {
			if st := source.IOStatus(); st.Chain {
				modes = append(modes, mode{b, true})
			} else {
				t.Logf("chained reads not tested here: %s", st.ChainReason)
			}
		}
	}
	for _, m := range modes {
		b := m.b
		for _, direct := range []bool{false, true} {
			for _, c := range cases {
				for _, policy := range []stage.OnError{stage.Stop, stage.Skip} {
					if c.bad < 0 && policy == stage.Skip {
						continue
					}
					name := fmt.Sprintf("%s/direct=%v/%s/%s", b, direct, c.name, policy)
					if m.separate {
						name = fmt.Sprintf("%s-separate/direct=%v/%s/%s", b, direct, c.name, policy)
					}
					t.Run(name, func(t *testing.T) {
						paths, want := dataset(t)
						in := readfault.New(c.rule)
						var skipped []error
						bud := &budget{}
						opts := source.Options{WorldSize: 1, Workers: 2, Budget: bud,
							Reader:     source.ReaderOptions{Backend: b, Direct: direct, Faults: in, QueueDepth: 4, SeparateCalls: m.separate},
							SkipPolicy: stage.SkipPolicy{OnError: policy},
							OnSkip:     func(err error) { skipped = append(skipped, err) },
						}
						it, err := source.NewFiles(paths).Samples(opts)
						if err != nil {
							t.Fatal(err)
						}
						keys, err := drain(t, it, want)
						rp := it.(source.ReadPathReporter).ReadPaths()
						if cerr := it.Close(); cerr != nil {
							t.Fatal(cerr)
						}
						if chained := rp.Chained + rp.FellBack; (b == source.BackendURing && !m.separate) != (chained > 0) {
							t.Errorf("read paths %+v: chained reads where none were wanted, or none where they were", rp)
						}
						if n := bud.n.Load(); n != 0 {
							t.Errorf("budget holds %d bytes after Close", n)
						}
						events := in.Events()
						if len(events) == 0 {
							t.Fatal("no fault was injected")
						}
						t.Logf("%d faults injected, first %v", len(events), events[0])
						if c.bad < 0 {
							if err != nil {
								t.Fatalf("a fault the reader must absorb ended the iteration: %v", err)
							}
							exactlyOnce(t, keys, paths)
							return
						}
						badPath := paths[c.bad]
						var re *source.ReadError
						cause := err
						if policy == stage.Skip {
							if err != nil {
								t.Fatalf("under skip: %v", err)
							}
							exactlyOnce(t, keys, append(append([]string{}, paths[:c.bad]...), paths[c.bad+1:]...))
							if len(skipped) != 1 || it.Skipped() != 1 {
								t.Fatalf("skips reported %v, counted %d; want the one file", skipped, it.Skipped())
							}
							var sk *source.Skipped
							if !errors.As(skipped[0], &sk) || sk.Path != badPath {
								t.Fatalf("skip %v does not name %s", skipped[0], badPath)
							}
							cause = skipped[0]
						} else {
							exactlyOnce(t, keys, paths[:c.bad])
						}
						if !errors.As(cause, &re) || re.Path != badPath || (c.is != nil && !errors.Is(cause, c.is)) {
							t.Fatalf("error %v: want a ReadError naming %s, wrapping %v", cause, badPath, c.is)
						}
						if c.is == nil && !strings.Contains(cause.Error(), fmt.Sprintf("file ended after %d of %d bytes", c.off, len(want[badPath]))) {
							t.Fatalf("error %v: want the file named as cut short at %d of its %d bytes", cause, c.off, len(want[badPath]))
						}
						if c.off >= 0 && re.Off != c.off {
							t.Fatalf("error %v names offset %d, want %d", cause, re.Off, c.off)
						}
						if !strings.Contains(cause.Error(), badPath) {
							t.Fatalf("message %q does not name %s", cause, badPath)
						}
					})
				}
			}
		}
	}
}

// TestSkipPolicyLimits: the decode stage's policy applies to read errors
// with its limits: MaxSkips stops the iteration at the skip beyond it,
// naming the file.
func TestSkipPolicyLimits(t *testing.T) {
	paths, want := dataset(t)
	in := readfault.New(readfault.EIO("1.bin", 0), readfault.EIO("3.bin", 0))
	var logged []string
	it, err := source.NewFiles(paths).Samples(source.Options{WorldSize: 1, Workers: 1,
		Reader:     source.ReaderOptions{Faults: in},
		SkipPolicy: stage.SkipPolicy{OnError: stage.Skip, MaxSkips: 1, Log: func(key string, err error) { logged = append(logged, key) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	keys, err := drain(t, it, want)
	exactlyOnce(t, keys, []string{paths[0], paths[2]})
	if err == nil || !strings.Contains(err.Error(), "too many bad samples") || !strings.Contains(err.Error(), paths[3]) {
		t.Fatalf("error %v: want the limit broken at %s", err, paths[3])
	}
	if len(logged) != 1 || logged[0] != paths[1] {
		t.Fatalf("logged %v, want %s named once", logged, paths[1])
	}
	if _, err := source.NewFiles(paths).Samples(source.Options{WorldSize: 1, Skip: true, SkipPolicy: stage.SkipPolicy{OnError: stage.Skip}}); err == nil {
		t.Fatal("Skip and SkipPolicy together were accepted")
	}
}

// TestTarUnderFaults: a tar shard read through faults the reader absorbs
// gives every sample once; EIO mid-shard stops with the shard and offset.
func TestTarUnderFaults(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "shard-0.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	want := map[string][]byte{}
	var keys []string
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 40 {
		data := make([]byte, 3000+rng.IntN(20000))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("s%03d.bin", i)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
		key := shard + ":" + fmt.Sprintf("s%03d", i)
		want[fmt.Sprintf("s%03d", i)] = data
		keys = append(keys, key)
	}
	tw.Close()
	if err := os.WriteFile(shard, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends(t) {
		for _, c := range []struct {
			name string
			rule readfault.Rule
			eio  bool
		}{
			{"short-reads", readfault.Short("", 7000, 30), false},
			{"eintr", readfault.EINTR("", 20), false},
			{"eio-mid-shard", readfault.EIO("shard-0.tar", 256<<10), true},
		} {
			t.Run(string(b)+"/"+c.name, func(t *testing.T) {
				in := readfault.New(c.rule)
				it, err := source.NewTar([]string{shard}).Samples(source.Options{WorldSize: 1, ChunkSize: 64 << 10,
					Reader: source.ReaderOptions{Backend: b, Faults: in}})
				if err != nil {
					t.Fatal(err)
				}
				defer it.Close()
				seen := map[string]int{}
				var order []string
				var ierr error
				ctx := context.Background()
				for {
					s, err := it.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						ierr = err
						break
					}
					k := s.Key
					if !bytes.Equal(s.Field("bin"), want[k]) {
						t.Errorf("%s: bytes differ", k)
					}
					seen[k]++
					order = append(order, k)
					s.Release()
				}
				if len(in.Events()) == 0 {
					t.Fatal("no fault was injected")
				}
				for k, n := range seen {
					if n != 1 {
						t.Fatalf("%s delivered %d times", k, n)
					}
				}
				for i, k := range order {
					if k != fmt.Sprintf("s%03d", i) {
						t.Fatalf("sample %d is %s: a sample was lost or reordered", i, k)
					}
				}
				if !c.eio {
					if ierr != nil || len(order) != len(keys) {
						t.Fatalf("%d of %d samples, error %v", len(order), len(keys), ierr)
					}
					return
				}
				var re *source.ReadError
				if !errors.As(ierr, &re) || re.Path != shard || re.Off != 256<<10 || !errors.Is(ierr, syscall.EIO) {
					t.Fatalf("error %v: want EIO naming %s at offset %d", ierr, shard, 256<<10)
				}
				if len(order) == 0 || len(order) == len(keys) {
					t.Fatalf("%d samples before EIO at 256 KiB", len(order))
				}
			})
		}
	}
}
