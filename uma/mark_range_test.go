//go:build linux

package uma

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestRangeOperations(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	cs := u.ChunkSize()
	a, err := u.NewArena("cache", 6*cs, ArenaOptions{PreemptWithoutSource: true, NoHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fill := func(i int, v byte) {
		b := make([]byte, cs)
		for k := range b {
			b[k] = v + byte(k)
		}
		if err := a.Write(ctx, int64(i)*cs, b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		fill(i, byte(i))
	}
	states := func() (out []State) {
		for _, c := range u.Snapshot().Arenas[0].Chunks {
			out = append(out, c.State)
		}
		return out
	}

	// Chunks 1-2 only: the others stay HOT.
	res, err := a.MarkRangePreemptible(ctx, cs+1, cs)
	if err != nil || res.Marked != 2 {
		t.Fatalf("MarkRangePreemptible = %+v, %v; want 2 marked", res, err)
	}
	if got := states(); got[0] != Hot || got[1] != Preemptible || got[2] != Preemptible || got[3] != Hot {
		t.Fatalf("states %v", got)
	}
	// Marking again leaves them alone; a leased chunk is skipped.
	l, err := a.Lease(ctx, 3*cs, cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = a.MarkRangePreemptible(ctx, cs, 3*cs)
	l.Release()
	if err != nil || res.Marked != 0 || res.Skipped != 1 {
		t.Fatalf("second mark = %+v, %v; want 0 marked, 1 skipped (leased)", res, err)
	}
	// An intact PREEMPTIBLE chunk is served with its bytes.
	l, err = a.Lease(ctx, cs, cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := l.Bytes(); b[0] != 1 || b[100] != 101 {
		t.Fatalf("chunk 1 served %d %d", b[0], b[100])
	}
	l.Release()

	// PageOut makes the kernel take chunk 2 without telling the ledger.
	n, err := a.PageOut(2*cs, cs)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || states()[2] != Preemptible {
		t.Fatalf("PageOut = %d; states %v", n, states())
	}
	if _, err := a.Lease(ctx, 2*cs, cs, nil); !errors.Is(err, ErrNoRehydrate) {
		t.Fatalf("Lease of a reclaimed chunk without source = %v; want ErrNoRehydrate", err)
	}
	if states()[2] != Evicted || u.Faults() != 1 {
		t.Fatalf("after the refused lease: states %v, faults %d", states(), u.Faults())
	}
	// A whole-chunk Write brings it back.
	fill(2, 9)
	if states()[2] != Hot {
		t.Fatalf("states after rewrite %v", states())
	}

	// EvictRange drops chunks 4-5 at once.
	freed, err := a.EvictRange(4*cs, 2*cs)
	if err != nil || freed != 2*cs {
		t.Fatalf("EvictRange = %d, %v; want %d", freed, err, 2*cs)
	}
	if got := states(); got[4] != Evicted || got[5] != Evicted {
		t.Fatalf("states %v", got)
	}
	if _, err := a.MarkRangePreemptible(ctx, 7*cs, 1); err == nil {
		t.Fatal("a range outside the arena was accepted")
	}
}

// EvictPreemptible drops the PREEMPTIBLE chunks, and only them, at once.
func TestEvictPreemptible(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	cs := u.ChunkSize()
	a, err := u.NewArena("slots", 4*cs, ArenaOptions{PreemptWithoutSource: true, NoHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range 4 {
		if err := a.Write(ctx, int64(i)*cs, make([]byte, cs)); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int64{1, 3} {
		if _, err := a.MarkRangePreemptible(ctx, i*cs, cs); err != nil {
			t.Fatal(err)
		}
	}
	freed, err := a.EvictPreemptible()
	if err != nil || freed != 2*cs {
		t.Fatalf("EvictPreemptible = %d, %v; want %d", freed, err, 2*cs)
	}
	var got []State
	for _, c := range u.Snapshot().Arenas[0].Chunks {
		got = append(got, c.State)
	}
	if want := []State{Hot, Evicted, Hot, Evicted}; !slices.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}
	if freed, err := a.EvictPreemptible(); err != nil || freed != 0 {
		t.Fatalf("a second EvictPreemptible = %d, %v; want 0", freed, err)
	}
	p, err := u.NewPool("pool", cs, ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Arena().EvictPreemptible(); err == nil {
		t.Fatal("EvictPreemptible on a pool's arena was accepted")
	}
}
