//go:build linux

package uma_test

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/uma"
)

// An artifact arena with a source: chunks are read in on first use, marked
// preemptible after use, and verified (or re-read) before they are served
// again.
func Example() {
	ctx := context.Background()
	u, err := uma.New(uma.Config{ChunkSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer u.Close()

	shard := func(ctx context.Context, id uma.ChunkID, dst []byte) error {
		for i := range dst { // re-read the chunk from its file, here generated
			dst[i] = byte(id.Index + 1)
		}
		return nil
	}
	a, err := u.NewArena("shard-00001", 4<<20, uma.ArenaOptions{Rehydrate: shard})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	l, err := a.Lease(ctx, 2<<20, 16, nil) // chunk 2, read in now
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leased byte:", l.Bytes()[0])
	l.Release()

	res, _ := a.MarkPreemptible(ctx, 1) // only chunk 2 is resident; the rest are EVICTED
	fmt.Println("marked preemptible:", res.Marked)

	l, err = a.Lease(ctx, 2<<20, 16, nil) // verified intact (or re-read) before use
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leased byte again:", l.Bytes()[0])
	l.Release()
	fmt.Println("outstanding leases:", u.Outstanding().Total())
	// Output:
	// leased byte: 3
	// marked preemptible: 1
	// leased byte again: 3
	// outstanding leases: 0
}

// A stable lease that does not fit in the stable tier is refused with the
// numbers.
func ExampleArena_AcquireStable() {
	ctx := context.Background()
	u, err := uma.New(uma.Config{ChunkSize: 1 << 20, StableBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer u.Close()
	a, _ := u.NewArena("weights", 2<<20, uma.ArenaOptions{})
	defer a.Close()

	s, err := a.AcquireStable(ctx, 0, 1<<20)
	fmt.Println("first:", err)
	_, err = a.AcquireStable(ctx, 1<<20, 1<<20)
	fmt.Println("second:", err)
	s.Release()
	// Output:
	// first: <nil>
	// second: uma: stable lease on chunks weights#1..1 refused: needs 1048576 bytes, stable tier has 1048576 of 1048576 bytes in use (Config.StableBytes)
}

// Graph buffers come from a pool as byte leases that count against the
// graph's byte budget (flow.Budget satisfies uma.Budget).
func ExamplePool_Alloc() {
	ctx := context.Background()
	u, err := uma.New(uma.Config{ChunkSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer u.Close()
	p, _ := u.NewPool("decode-buffers", 8<<20, uma.ArenaOptions{})
	defer p.Close()

	var budget uma.Budget // a graph's *flow.Budget; nil: no accounting
	l, err := p.Alloc(ctx, 150528, budget)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(l.Bytes()), p.InUse())
	var r uma.Releaser = l // released by the graph when consumed
	r.Release()
	fmt.Println(p.InUse())
	// Output:
	// 150528 150528
	// 0
}

// The ledger's state machine is data.
func ExampleAllowed() {
	fmt.Println(uma.Allowed(uma.Preemptible, uma.Hot))
	fmt.Println(uma.Allowed(uma.Stable, uma.Preemptible))
	// Output:
	// true
	// false
}
