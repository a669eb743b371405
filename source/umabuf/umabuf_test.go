package umabuf_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/source/umabuf"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/uma"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newUMA(t *testing.T) *uma.UMA {
	t.Helper()
	u, err := uma.New(uma.Config{ChunkSize: 256 << 10, MemoryLimit: func() (int64, string, error) { return 1 << 30, "test", nil }})
	if err != nil {
		t.Skipf("uma unavailable here: %v", err)
	}
	t.Cleanup(func() {
		if err := u.Close(); err != nil {
			t.Errorf("uma.Close: %v", err)
		}
	})
	return u
}

func TestNewRefusesUnregisteredPools(t *testing.T) {
	u := newUMA(t)
	p, err := u.NewPool("plain", 1<<20, uma.ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := umabuf.New(p); err == nil {
		t.Fatal("New accepted a pool whose memory may be trimmed")
	}
}

// TestGraphReadsIntoUMA reads a folder through a graph whose reader takes its
// buffers from a registered UMA pool: every byte matches the files, every
// buffer is aligned for O_DIRECT and lies in the pool, and when the graph
// ends the ledger holds no lease.
func TestGraphReadsIntoUMA(t *testing.T) {
	dir := t.TempDir()
	want := map[string][]byte{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		b := make([]byte, 1+r.IntN(300<<10))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		name := filepath.Join(dir, fmt.Sprintf("%03d.bin", i))
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = b
	}
	for _, tc := range []struct {
		backend source.Backend
		direct  bool
	}{{source.BackendURing, false}, {source.BackendURing, true}, {source.BackendPread, false}, {source.BackendPread, true}} {
		t.Run(fmt.Sprintf("%s-direct=%v", tc.backend, tc.direct), func(t *testing.T) {
			u := newUMA(t)
			pool, err := u.NewPool("read-buffers", 8<<20, uma.ArenaOptions{Registered: true})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			bufs, err := umabuf.New(pool)
			if err != nil {
				t.Fatal(err)
			}
			region := bufs.Regions()[0]
			files, err := source.Dir(dir)
			if err != nil {
				t.Fatal(err)
			}
			g := flow.New("read", flow.WithBudget(4<<20))
			samples := flowsrc.Files(g, "read", files, source.Options{
				Buffers: bufs,
				Reader:  source.ReaderOptions{Backend: tc.backend, Direct: tc.direct},
			})
			seen := 0
			flow.Sink(flow.Via(samples, stage.Tap[*source.Sample]("tap", func(*source.Sample) {})), "check", func(_ context.Context, s *source.Sample) error {
				data := s.Fields[0].Data
				if !bytes.Equal(data, want[s.Key]) {
					return fmt.Errorf("%s: %d bytes read differ from the file's %d", s.Key, len(data), len(want[s.Key]))
				}
				if len(data) > 0 {
					p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
					lo := uintptr(unsafe.Pointer(unsafe.SliceData(region)))
					if p < lo || p+uintptr(len(data)) > lo+uintptr(len(region)) || p%source.Align != 0 {
						return fmt.Errorf("%s: buffer at %#x is not an aligned part of the UMA pool [%#x, +%d)", s.Key, p, lo, len(region))
					}
				}
				seen++
				return nil
			})
			if err := g.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if seen != len(want) {
				t.Fatalf("read %d of %d files", seen, len(want))
			}
			if err := u.CheckNoLeases(); err != nil {
				t.Fatal(err)
			}
			if pool.InUse() != 0 || g.Budget().InUse() != 0 {
				t.Fatalf("pool %d, budget %d bytes still in use", pool.InUse(), g.Budget().InUse())
			}
		})
	}
}
