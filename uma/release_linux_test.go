//go:build linux

package uma

import (
	"context"
	"testing"
)

// ReleaseFree drops free chunks at once (mincore: nothing resident), keeps the
// chunk of a live allocation, and releases chunks an earlier Trim left lazily freed.
func TestPoolReleaseFreeDropsPagesNow(t *testing.T) {
	u := newTestUMA(t, testConfig())
	cs := u.ChunkSize()
	p, err := u.NewPool("spill", 4*cs, ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	keep, err := p.Alloc(ctx, int(cs), nil)
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := p.Alloc(ctx, int(3*cs), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tmp.Bytes() {
		tmp.Bytes()[i] = 1
	}
	copy(keep.Bytes(), "live")
	tmp.Release()
	if n := nonResident(t, p.Arena(), 1); n != 0 {
		t.Fatalf("chunk 1 has %d non-resident pages before release", n)
	}
	n, err := p.ReleaseFree()
	if err != nil || n != 3*cs {
		t.Fatalf("ReleaseFree = %d, %v; want %d", n, err, 3*cs)
	}
	for i := 1; i < 4; i++ {
		if r, pages := p.Arena().residentPages(p.Arena().span(i)); r != 0 {
			t.Fatalf("chunk %d: %d of %d pages still resident after ReleaseFree", i, r, pages)
		}
	}
	if string(keep.Bytes()[:4]) != "live" {
		t.Fatal("the live allocation was released")
	}
	// Trim (lazy) then ReleaseFree: released again, not counted twice.
	again, err := p.Alloc(ctx, int(3*cs), nil)
	if err != nil {
		t.Fatal(err)
	}
	again.Release()
	if n, err := p.Trim(); err != nil || n != 3*cs {
		t.Fatalf("Trim = %d, %v", n, err)
	}
	if n, err := p.ReleaseFree(); err != nil || n != 0 {
		t.Fatalf("ReleaseFree after Trim = %d, %v; want 0 counted", n, err)
	}
	if r, _ := p.Arena().residentPages(p.Arena().span(2)); r != 0 {
		t.Fatalf("lazily freed chunk still resident after ReleaseFree: %d pages", r)
	}
	keep.Release()
}
