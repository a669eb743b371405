//go:build linux

package umacache

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/uma"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newUMA(t *testing.T) *uma.UMA {
	t.Helper()
	u, err := uma.New(uma.Config{ChunkSize: 64 << 10, MemoryLimit: func() (int64, string, error) { return 8 << 30, "test", nil }})
	if err != nil {
		t.Skipf("uma unavailable: %v", err)
	}
	t.Cleanup(func() {
		if err := u.Close(); err != nil {
			t.Errorf("uma Close: %v", err)
		}
	})
	return u
}

func newCache(t *testing.T, chunk, max int64) *Cache {
	t.Helper()
	c, err := New(Config{UMA: newUMA(t), Name: "test", ChunkBytes: chunk, MaxBytes: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// payload is n bytes that depend on key, so a mix-up shows.
func payload(key string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ key[i%len(key)]
	}
	return b
}

func TestPutGet(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		size int
	}{
		{"one byte", 1},
		{"part of a chunk", 5000},
		{"exactly a chunk", 16 << 10},
		{"several chunks with a tail", 3*(16<<10) + 123},
	}
	c := newCache(t, 16<<10, 1<<20)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := payload(tc.name, tc.size)
			if ok, err := c.Put(ctx, tc.name, 1, want); !ok || err != nil {
				t.Fatalf("Put = %v, %v", ok, err)
			}
			if !c.Contains(tc.name, 1) || c.Contains(tc.name, 2) {
				t.Fatal("Contains disagrees with the signature")
			}
			got, ok, err := c.Get(ctx, tc.name, 1, nil)
			if !ok || err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Get = %d bytes, %v, %v; want the %d bytes put", len(got), ok, err, len(want))
			}
			if _, ok, _ := c.Get(ctx, tc.name, 2, nil); ok {
				t.Fatal("Get with another signature hit")
			}
		})
	}
	s := c.Stats()
	if s.Hits != 4 || s.Misses != 4 || s.Puts != 4 || s.Entries != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestEvictsColdestWithinTheLimit(t *testing.T) {
	ctx := context.Background()
	c := newCache(t, 16<<10, 4*(16<<10))
	for i := range 4 {
		if ok, err := c.Put(ctx, fmt.Sprint(i), 0, payload(fmt.Sprint(i), 100)); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	// Touch 0 so that 1 is the coldest.
	if _, ok, _ := c.Get(ctx, "0", 0, nil); !ok {
		t.Fatal("miss on 0")
	}
	if ok, _ := c.Put(ctx, "4", 0, payload("4", 100)); !ok {
		t.Fatal("put 4 refused")
	}
	if c.Contains("1", 0) || !c.Contains("0", 0) || !c.Contains("4", 0) {
		t.Fatal("the coldest entry (1) was not the one evicted")
	}
	if ok, _ := c.Put(ctx, "big", 0, make([]byte, 5*(16<<10))); ok {
		t.Fatal("an entry larger than the cache was stored")
	}
	// SetLimit to two chunks keeps the two most recent entries.
	if got := c.SetLimit(2 * (16 << 10)); got != 2*(16<<10) {
		t.Fatalf("SetLimit = %d", got)
	}
	if s := c.Stats(); s.Entries != 2 || !c.Contains("4", 0) || s.Bytes != 2*(16<<10) {
		t.Fatalf("after SetLimit: %+v", s)
	}
	if freed := c.Shed(1); freed != 16<<10 || c.Stats().Entries != 1 {
		t.Fatalf("Shed freed %d, entries %d", freed, c.Stats().Entries)
	}
}

// TestReclaimedEntriesAreNeverServed makes the kernel take some entries' pages
// (MADV_PAGEOUT after MADV_FREE, what pressure does) and checks that every Get
// either returns the exact bytes put or a miss, and that misses are counted.
func TestReclaimedEntriesAreNeverServed(t *testing.T) {
	ctx := context.Background()
	c := newCache(t, 16<<10, 64*(16<<10))
	const n = 20
	for i := range n {
		k := fmt.Sprint("k", i)
		if ok, err := c.Put(ctx, k, 0, payload(k, 20000)); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	// Page out the first 10 chunks of the arena: whatever entries they belong to.
	paged, err := c.arena.PageOut(0, 10*c.chunk)
	if err != nil {
		t.Skipf("kernel refuses MADV_PAGEOUT: %v", err)
	}
	if paged == 0 {
		t.Fatal("nothing was PREEMPTIBLE to page out")
	}
	if taken, err := c.Taken(); err != nil || taken < 1 || taken > n {
		t.Fatalf("Taken = %d, %v after paging out %d chunks", taken, err, paged)
	}
	hits := 0
	for i := range n {
		k := fmt.Sprint("k", i)
		got, ok, err := c.Get(ctx, k, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			hits++
			if !bytes.Equal(got, payload(k, 20000)) {
				t.Fatalf("entry %s served bytes that differ from what was put", k)
			}
		}
	}
	s := c.Stats()
	if s.Reclaimed < 1 || hits+int(s.Reclaimed) != n {
		t.Fatalf("hits %d, stats %+v: want every entry either served intact or counted reclaimed", hits, s)
	}
	// A reclaimed entry can be put again and served.
	for i := range n {
		k := fmt.Sprint("k", i)
		if !c.Contains(k, 0) {
			if ok, err := c.Put(ctx, k, 0, payload(k, 20000)); !ok || err != nil {
				t.Fatal(ok, err)
			}
			if got, ok, _ := c.Get(ctx, k, 0, nil); !ok || !bytes.Equal(got, payload(k, 20000)) {
				t.Fatalf("re-put entry %s not served", k)
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	c := newCache(t, 16<<10, 32*(16<<10))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := range 200 {
				k := fmt.Sprint((i*7 + w) % 50)
				want := payload(k, 20000)
				if got, ok, err := c.Get(ctx, k, 0, buf); err != nil {
					errs <- err
					return
				} else if ok && !bytes.Equal(got, want) {
					errs <- fmt.Errorf("entry %s: wrong bytes", k)
					return
				} else {
					buf = got
				}
				if _, err := c.Put(ctx, k, 0, want); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					c.Shed(64 << 10)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	c := newCache(t, 16<<10, 1<<20)
	if _, err := c.Put(context.Background(), "a", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	c.Get(context.Background(), "a", 0, nil)
	c.Get(context.Background(), "b", 0, nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collector())
	want := `# HELP psiflow_cache_hits_total Cache lookups that served an intact entry.
# TYPE psiflow_cache_hits_total counter
psiflow_cache_hits_total{cache="test"} 1
# HELP psiflow_cache_misses_total Cache lookups that found no entry, or found it reclaimed.
# TYPE psiflow_cache_misses_total counter
psiflow_cache_misses_total{cache="test"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "psiflow_cache_hits_total", "psiflow_cache_misses_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("no UMA accepted")
	}
	if _, err := New(Config{UMA: newUMA(t), ChunkBytes: 16 << 10, MaxBytes: 100}); err == nil {
		t.Fatal("a cache smaller than one chunk accepted")
	}
}
