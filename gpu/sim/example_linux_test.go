//go:build linux

package sim_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/psiflow/psiflow/gpu/sim"
	"github.com/psiflow/psiflow/uma"
)

// A host buffer from a UMA arena, registered once, copied to the simulated
// device on a stream and read back.
func ExampleOpen() {
	ctx := context.Background()
	d, _ := sim.Open(sim.Config{Capacity: 1 << 30, Bandwidth: 25e9})
	defer d.Close()
	fmt.Println(d.Name())

	u, _ := uma.New(uma.Config{})
	defer u.Close()
	arena, _ := u.NewArena("staging", 1<<20, uma.ArenaOptions{})
	reg, _ := arena.Register(ctx, 0, 1<<20, true) // the ledger knows it is registered
	defer reg.Release()
	host := reg.Bytes()
	copy(host, "a batch")

	if err := d.Register(host); err != nil { // once, not per batch
		fmt.Println(err)
		return
	}
	defer d.Unregister(host)
	p, _ := d.Alloc(ctx, 1<<20)
	defer d.Free(p)
	s, _ := d.NewStream()
	defer s.Close()
	ev, _ := d.NewEvent()
	defer ev.Close()

	_ = s.CopyToDevice(p, host) // asynchronous
	_ = s.Record(ev)
	_ = ev.Wait(ctx) // host may be reused from here on

	back := make([]byte, 7)
	_ = d.CopyToHost(ctx, back, p)
	fmt.Println(string(back), bytes.Equal(back, host[:7]), d.Stats().Copies)

	// The Go heap is refused.
	fmt.Println(d.Register(make([]byte, 4096)) != nil)
	// Output:
	// simulated device (1 GiB, 25.0 GB/s host-to-device, 10µs per copy)
	// a batch true 1
	// true
}
