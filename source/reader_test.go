package source

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// backends lists the backends this host can run; io_uring is skipped with a
// reason where the kernel refuses it.
func backends(t *testing.T) []Backend {
	t.Helper()
	bs := []Backend{BackendPread}
	if uringReason() == "" && runtime.GOOS == "linux" {
		bs = append(bs, BackendURing)
	} else {
		t.Logf("io_uring not tested here: %s", uringReason())
	}
	return bs
}

func writeFile(t testing.TB, dir, name string, n int, seed uint64) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, data
}

// countGate is a Gate that counts permits held.
type countGate struct{ held, max atomic.Int64 }

func (g *countGate) Acquire(ctx context.Context) error {
	if n := g.held.Add(1); n > g.max.Load() {
		g.max.Store(n)
	}
	return ctx.Err()
}
func (g *countGate) Release() { g.held.Add(-1) }

func TestReaderReadsExactBytes(t *testing.T) {
	dir := t.TempDir()
	path, data := writeFile(t, dir, "data.bin", 3<<20+1234, 1)
	pool, err := NewPool(16, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	})
	type variant struct {
		name string
		opts ReaderOptions
	}
	variants := []variant{
		{"plain", ReaderOptions{QueueDepth: 4}},
		{"fixed-buffers", ReaderOptions{QueueDepth: 8, Buffers: pool}},
		{"register-files", ReaderOptions{QueueDepth: 8, Buffers: pool, RegisterFiles: true}},
		{"direct", ReaderOptions{QueueDepth: 8, Buffers: pool, Direct: true}},
		{"drop-cache", ReaderOptions{QueueDepth: 2, DropCache: true, DropEvery: 1 << 20, Batch: 1}},
	}
	for _, b := range backends(t) {
		for _, v := range variants {
			t.Run(string(b)+"/"+v.name, func(t *testing.T) {
				opts := v.opts
				opts.Backend = b
				r, err := NewReader(opts)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if r.Backend() != b {
					t.Fatalf("backend %s, want %s", r.Backend(), b)
				}
				f, err := r.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if fr, ok := r.(interface{ FixedBuffers() bool }); ok {
					t.Logf("direct=%v fixed=%v slot=%d", f.Direct(), fr.FixedBuffers(), f.slot)
				}
				if f.Size != int64(len(data)) {
					t.Fatalf("size %d, want %d", f.Size, len(data))
				}
				gate := &countGate{}
				rng := rand.New(rand.NewPCG(2, 3))
				ctx := context.Background()
				out := make([]Completion, 8)
				checked := 0
				check := func(n int) {
					for _, c := range out[:n] {
						if c.Err != nil {
							t.Fatal(c.Err)
						}
						want := data[min(int(c.Off), len(data)):min(int(c.Off)+len(c.Buf), len(data))]
						if c.N != len(want) || !bytes.Equal(c.Buf[:c.N], want) {
							t.Fatalf("read at %d: got %d bytes, want %d (equal=%v)", c.Off, c.N, len(want), bytes.Equal(c.Buf[:c.N], want))
						}
						c.Tag.(Buffer).Release()
						checked++
					}
				}
				const reads = 60
				for i := 0; i < reads; i++ {
					size := 1 + rng.IntN(200<<10)
					off := int64(rng.IntN(len(data) + 4096))
					if i%3 == 0 {
						off = off / Align * Align // aligned: O_DIRECT path
					}
					if i == reads-1 {
						off, size = int64(len(data)-1000), 5000 // crosses EOF
					}
					buf, err := Admit(ctx, gate, pool, size)
					if err != nil {
						t.Fatal(err)
					}
					if err := r.Submit(Request{File: f, Off: off, Buf: buf.Bytes(), Permit: gate, Tag: buf}); err != nil {
						t.Fatal(err)
					}
					if i%5 == 4 {
						n, err := r.Reap(ctx, out, 1)
						if err != nil {
							t.Fatal(err)
						}
						check(n)
					}
				}
				for r.InFlight() > 0 {
					n, err := r.Reap(ctx, out, len(out))
					if err != nil {
						t.Fatal(err)
					}
					check(n)
				}
				n, _ := r.Reap(ctx, out, 0)
				check(n)
				if checked != reads {
					t.Fatalf("%d completions, want %d", checked, reads)
				}
				if g := gate.held.Load(); g != 0 {
					t.Fatalf("%d permits still held after all completions", g)
				}
				if m := gate.max.Load(); m > int64(opts.QueueDepth)+8 {
					t.Fatalf("max permits held %d", m)
				}
			})
		}
	}
}

func TestReadErrorNamesPathAndOffset(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(string(b), func(t *testing.T) {
			r, err := NewReader(ReaderOptions{Backend: b})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			missing := filepath.Join(t.TempDir(), "missing.bin")
			if _, err := r.Open(missing); err == nil || !errors.Is(err, os.ErrNotExist) || !bytes.Contains([]byte(err.Error()), []byte(missing)) {
				t.Fatalf("open of a missing file: %v", err)
			}
			if runtime.GOOS != "linux" {
				return
			}
			// /proc/self/mem fails with EIO at an unmapped address.
			f, err := r.Open("/proc/self/mem")
			if err != nil {
				t.Skipf("cannot open /proc/self/mem: %v", err)
			}
			defer f.Close()
			buf := make([]byte, 100)
			if err := r.Submit(Request{File: f, Off: 4096, Buf: buf}); err != nil {
				t.Fatal(err)
			}
			out := make([]Completion, 1)
			if n, err := r.Reap(context.Background(), out, 1); err != nil || n != 1 {
				t.Fatalf("reap = %d, %v", n, err)
			}
			var re *ReadError
			if !errors.As(out[0].Err, &re) || re.Path != "/proc/self/mem" || re.Off != 4096 {
				t.Fatalf("error %v does not name path and offset 4096", out[0].Err)
			}
		})
	}
}

func TestForcedFallback(t *testing.T) {
	tests := []struct {
		env         string
		wantBackend Backend
		wantForced  bool
	}{
		{"pread", BackendPread, true},
		{"", "", false},
	}
	for _, tc := range tests {
		t.Run("env="+tc.env, func(t *testing.T) {
			t.Setenv(EnvIO, tc.env)
			st := probeStatus()
			if st.Forced != tc.wantForced {
				t.Fatalf("status %+v", st)
			}
			if tc.wantBackend != "" && st.Backend != tc.wantBackend {
				t.Fatalf("backend %s, want %s", st.Backend, tc.wantBackend)
			}
			if st.Backend == BackendPread && st.Reason == "" {
				t.Fatal("pread without a reason")
			}
			if st.Backend == BackendURing && st.Reason != "" && !st.Forced {
				t.Fatalf("io_uring chosen despite %q", st.Reason)
			}
		})
	}
}

func TestPoolWaitsAndCloses(t *testing.T) {
	p, err := NewPool(2, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.SlotSize != 8192 || s.Slots != 2 {
		t.Fatalf("stats %+v", s)
	}
	ctx := context.Background()
	a, _ := p.Alloc(ctx, 100)
	b, _ := p.Alloc(ctx, 8192)
	if len(a.Bytes()) != 100 || cap(a.Bytes()) != Align || !addrAligned(a.Bytes()) && runtime.GOOS == "linux" {
		t.Fatalf("buffer len %d cap %d", len(a.Bytes()), cap(a.Bytes()))
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Alloc(tctx, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("alloc on an empty pool: %v", err)
	}
	big, err := p.Alloc(ctx, 100000)
	if err != nil || len(big.Bytes()) != 100000 || p.Stats().Oversize != 1 {
		t.Fatalf("oversize: %v", err)
	}
	a.Release()
	a.Release() // second release is ignored
	b.Release()
	big.Release()
	if p.Stats().InUse != 0 {
		t.Fatalf("in use %d", p.Stats().InUse)
	}
	c, _ := p.Alloc(ctx, 10)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Alloc(ctx, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("alloc after close: %v", err)
	}
	c.Bytes()[0] = 1 // still mapped while in use
	c.Release()
}

func TestPoolOverflow(t *testing.T) {
	p, err := NewPool(1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetOverflow(true)
	ctx := context.Background()
	a, _ := p.Alloc(ctx, 100)
	b, err := p.Alloc(ctx, 100) // no free slot: a separate buffer, no wait
	if err != nil || len(b.Bytes()) != 100 {
		t.Fatalf("overflow alloc: %v", err)
	}
	if s := p.Stats(); s.Overflow != 1 || s.InUse != 2 {
		t.Fatalf("stats %+v", s)
	}
	a.Release()
	b.Release()
	if s := p.Stats(); s.InUse != 0 {
		t.Fatalf("stats %+v", s)
	}
}
