//go:build linux

package uma

import (
	"context"
	"fmt"
	"testing"

	"github.com/zeebo/xxh3"
)

// benchUMA returns a UMA and an artifact arena of size bytes whose source
// is an in-memory copy (re-hydration is a memcpy).
func benchArena(b *testing.B, chunk, size int64, noHuge bool) (*UMA, *Arena, []byte) {
	b.Helper()
	cfg := testConfig()
	cfg.ChunkSize = chunk
	u := newTestUMA(b, cfg)
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*131) | 1
	}
	a, err := u.NewArena("bench", size, ArenaOptions{NoHugePages: noHuge, Rehydrate: func(_ context.Context, id ChunkID, dst []byte) error {
		copy(dst, src[int64(id.Index)*chunk:])
		return nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	if err := a.Hydrate(context.Background(), 0, size); err != nil {
		b.Fatal(err)
	}
	return u, a, src
}

const gib = 1 << 30

// BenchmarkMarkPreemptible: checksum + MADV_FREE of a 256 MiB arena; the
// figure to quote is ns/op ÷ 0.25 = cost per GiB.
func BenchmarkMarkPreemptible(b *testing.B) {
	ctx := context.Background()
	const size = 256 << 20
	_, a, _ := benchArena(b, 4<<20, size, false)
	b.SetBytes(size)
	for b.Loop() {
		res, err := a.MarkPreemptible(ctx, 1)
		if err != nil || res.Marked != a.Chunks() {
			b.Fatal(res, err)
		}
		b.StopTimer()
		if err := a.Hydrate(ctx, 0, size); err != nil { // re-acquire (verified, not timed)
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*gib/size/1e6, "ms/GiB")
}

// BenchmarkEvict: MADV_DONTNEED of a 256 MiB arena (EvictTail).
func BenchmarkEvict(b *testing.B) {
	ctx := context.Background()
	const size = 256 << 20
	_, a, _ := benchArena(b, 4<<20, size, false)
	b.SetBytes(size)
	for b.Loop() {
		n, err := a.EvictTail(size)
		if err != nil || n != size {
			b.Fatal(n, err)
		}
		b.StopTimer()
		if err := a.Hydrate(ctx, 0, size); err != nil { // re-hydrate from the source (not timed)
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*gib/size/1e6, "ms/GiB")
}

var chunkSizes = []int64{4 << 20, 64 << 20}

// BenchmarkReacquireIntact: lease a PREEMPTIBLE chunk the kernel did not
// reclaim (mincore + touch-write per page + xxh3 verify), against
// BenchmarkMemcpy of the same size. Goal: ≤ 1.1× the memcpy.
func BenchmarkReacquireIntact(b *testing.B) {
	ctx := context.Background()
	for _, mk := range memKinds {
		for _, cs := range chunkSizes {
			b.Run(fmt.Sprintf("mem=%s/chunk=%dMiB", mk.name, cs>>20), func(b *testing.B) {
				reacquire(ctx, b, cs, mk.huge)
			})
		}
	}
}

func reacquire(ctx context.Context, b *testing.B, cs int64, huge bool) {
	u, a, _ := benchArena(b, cs, cs, !huge)
	b.SetBytes(cs)
	for b.Loop() {
		b.StopTimer()
		if res, err := a.MarkPreemptible(ctx, 1); err != nil || res.Marked != 1 {
			b.Fatal(res, err)
		}
		b.StartTimer()
		l, err := a.Lease(ctx, 0, cs, nil)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
	if u.Faults() != 0 {
		b.Logf("%d faults: the kernel reclaimed during the benchmark", u.Faults())
	}
}

// benchBuf maps size bytes like an arena does (with the MADV_HUGEPAGE
// hint when huge) so that baselines run on the same kind of memory.
func benchBuf(b *testing.B, size int64, huge bool) []byte {
	b.Helper()
	k := defaultKernel()
	m, err := k.mmap(int(size))
	if err != nil {
		b.Fatal(err)
	}
	if huge {
		_ = k.madvise(m, adviseHugePage)
	}
	b.Cleanup(func() { _ = k.munmap(m) })
	for i := range m {
		m[i] = byte(i*131) | 1
	}
	return m
}

var memKinds = []struct {
	name string
	huge bool
}{{"thp", true}, {"4k", false}}

// BenchmarkMemcpy is the reference for BenchmarkReacquireIntact: a copy of
// one chunk between two mappings of the same kind as arenas (thp: with the
// MADV_HUGEPAGE hint arenas use; 4k: without).
func BenchmarkMemcpy(b *testing.B) {
	for _, mk := range memKinds {
		for _, cs := range chunkSizes {
			b.Run(fmt.Sprintf("mem=%s/chunk=%dMiB", mk.name, cs>>20), func(b *testing.B) {
				src := benchBuf(b, cs, mk.huge)
				dst := benchBuf(b, cs, mk.huge)
				b.SetBytes(cs)
				for b.Loop() {
					copy(dst, src)
				}
			})
		}
	}
}

// BenchmarkChecksum is xxh3 alone over a chunk.
func BenchmarkChecksum(b *testing.B) {
	for _, mk := range memKinds {
		for _, cs := range chunkSizes {
			b.Run(fmt.Sprintf("mem=%s/chunk=%dMiB", mk.name, cs>>20), func(b *testing.B) {
				buf := benchBuf(b, cs, mk.huge)
				b.SetBytes(cs)
				var s uint64
				for b.Loop() {
					s += xxh3.Hash(buf)
				}
				_ = s
			})
		}
	}
}

// BenchmarkLease: acquire and release per operation, by lease kind.
func BenchmarkLease(b *testing.B) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.StableBytes = 1 << 30
	u := newTestUMA(b, cfg)
	a, err := u.NewArena("lease", 64*u.ChunkSize(), ArenaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	pool, err := u.NewPool("lease-pool", 64*u.ChunkSize(), ArenaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pool.Close() })
	budget := newTestBudget(1 << 40)
	b.Run("byte", func(b *testing.B) {
		for b.Loop() {
			l, err := a.Lease(ctx, 4096, 8192, budget)
			if err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
	})
	b.Run("byte-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, err := a.Lease(ctx, 4096, 8192, budget)
				if err != nil {
					b.Error(err)
					return
				}
				l.Release()
			}
		})
	})
	b.Run("pin", func(b *testing.B) {
		for b.Loop() {
			p, err := a.Pin(ctx, 0, 8192)
			if err != nil {
				b.Fatal(err)
			}
			p.Release()
		}
	})
	b.Run("stable", func(b *testing.B) {
		for b.Loop() {
			s, err := a.AcquireStable(ctx, 0, 8192)
			if err != nil {
				b.Fatal(err)
			}
			s.Release()
		}
	})
	b.Run("pool-alloc-8KiB", func(b *testing.B) {
		for b.Loop() {
			l, err := pool.Alloc(ctx, 8192, budget)
			if err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
	})
}
