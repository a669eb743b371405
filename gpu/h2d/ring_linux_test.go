//go:build linux

package h2d

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/uma"
)

func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*13 + seed)
	}
}

// TestRingStreams copies many batches through a ring and checks every one on
// the device, the ledger states, and that the slots were registered once
// each, not per batch.
func TestRingStreams(t *testing.T) {
	for _, dv := range devices(t) {
		t.Run(dv.name, func(t *testing.T) {
			ctx := context.Background()
			d := dv.open(t)
			u := newUMA(t)
			const slot, batches = 100_000, 40
			r, err := NewRing(Config{UMA: u, Device: d, SlotBytes: slot, Slots: 6})
			if err != nil {
				t.Fatal(err)
			}
			var before map[string]int64
			names := []string{"cuMemHostRegister_v2", "cuMemcpyHtoDAsync_v2", "cuEventRecord", "cuEventSynchronize", "cuMemAlloc_v2", ""}
			if dv.calls != nil {
				before = dv.calls(names...)
			}
			// Two batches in flight: stage n+1 while n is copied.
			var pending []*Slot
			var ptrs []gpu.Ptr
			for i := range batches {
				s, err := r.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				fill(s.Bytes()[:slot-i], i)
				p, err := s.Copy(ctx, int64(slot-i))
				if err != nil {
					t.Fatal(err)
				}
				pending = append(pending, s)
				ptrs = append(ptrs, p)
				if len(pending) == 2 {
					if err := pending[0].Finish(ctx); err != nil {
						t.Fatal(err)
					}
					verify(t, d, ptrs[0], i-1, slot-(i-1))
					r.PutBuffer(ptrs[0])
					pending, ptrs = pending[1:], ptrs[1:]
				}
			}
			if err := pending[0].Finish(ctx); err != nil {
				t.Fatal(err)
			}
			verify(t, d, ptrs[0], batches-1, slot-(batches-1))
			r.PutBuffer(ptrs[0])
			st := r.Stats()
			if st.Copies != batches || st.Registrations > 3 || st.Marked != 0 {
				t.Errorf("stats %+v: want %d copies, at most 3 registrations (the slots in flight), nothing marked", st, batches)
			}
			if dv.calls != nil {
				after := dv.calls(names...)
				per := func(n string) int64 { return after[n] - before[n] }
				if per("cuMemHostRegister_v2") > 3 || per("cuMemcpyHtoDAsync_v2") != batches || per("cuEventRecord") != batches || per("cuEventSynchronize") != batches || per("cuMemAlloc_v2") > 3 {
					t.Errorf("driver calls for %d batches: %v", batches, map[string]int64{
						"register": per("cuMemHostRegister_v2"), "copy": per("cuMemcpyHtoDAsync_v2"), "record": per("cuEventRecord"),
						"sync": per("cuEventSynchronize"), "alloc": per("cuMemAlloc_v2")})
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func verify(t *testing.T, d gpu.Device, p gpu.Ptr, seed, n int) {
	t.Helper()
	back := make([]byte, n)
	if err := d.CopyToHost(context.Background(), back, p); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, n)
	fill(want, seed)
	if !bytes.Equal(back, want) {
		t.Fatalf("batch %d on the device differs from what was staged", seed)
	}
}

// TestRingAfterCopy: slots returned beyond what the ring needs registered are
// unregistered and given back per the policy; registered ones never are.
func TestRingAfterCopy(t *testing.T) {
	for _, tc := range []struct {
		policy AfterCopy
		want   uma.State
	}{
		{Preemptible, uma.Preemptible},
		{Evict, uma.Evicted},
		{Keep, uma.CopiedGPU},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			ctx := context.Background()
			d := devices(t)[0].open(t)
			u := newUMA(t)
			r, err := NewRing(Config{UMA: u, Device: d, SlotBytes: 1 << 16, Slots: 5, AfterCopy: tc.policy, KeepRegistered: 2, Window: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var slots []*Slot
			var ptrs []gpu.Ptr
			for i := range 5 { // a burst: every slot at once
				s, err := r.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				fill(s.Bytes(), i)
				p, err := s.Copy(ctx, 1<<16)
				if err != nil {
					t.Fatal(err)
				}
				slots = append(slots, s)
				ptrs = append(ptrs, p)
			}
			for i, s := range slots {
				if err := s.Finish(ctx); err != nil {
					t.Fatal(err)
				}
				r.PutBuffer(ptrs[i])
			}
			// Right after a burst of 5 the ring keeps all 5 registered: the
			// burst may come again. Nothing is registered per batch.
			if st := r.Stats(); st.Registered != 5 || st.Unregistrations != 0 {
				t.Fatalf("after the burst: %+v, want all 5 registered", st)
			}
			// Then one batch at a time: once a window (3 acquisitions) has
			// passed, the peak is 1, and each slot returned beyond
			// KeepRegistered (2) follows the policy: the 3rd, 4th and 5th.
			for i := range 5 {
				s, err := r.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				fill(s.Bytes(), 10+i)
				p, err := s.Copy(ctx, 1<<16)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Finish(ctx); err != nil {
					t.Fatal(err)
				}
				r.PutBuffer(p)
			}
			counts := map[uma.State]int{}
			regs := 0
			for _, c := range u.Snapshot().Arenas[0].Chunks {
				counts[c.State]++
				regs += c.Registered
				if c.Registered > 0 && c.State != uma.CopiedGPU {
					t.Errorf("registered chunk %v is %s", c.ID, c.State)
				}
			}
			st := r.Stats()
			// Shed gives the PREEMPTIBLE slots' pages back at once (they become
			// EVICTED); registered slots and slots already evicted are left alone.
			shed, err := r.Shed()
			if err != nil {
				t.Fatal(err)
			}
			if want := map[AfterCopy]int64{Preemptible: 3 * r.SlotBytes()}[tc.policy]; shed != want {
				t.Fatalf("Shed gave back %d bytes, want %d", shed, want)
			}
			if tc.policy == Keep {
				if counts[uma.CopiedGPU] != 5 || regs != 5 {
					t.Fatalf("keep: states %v, %d registered; want all 5 COPIED_GPU and registered", counts, regs)
				}
				return
			}
			if counts[uma.CopiedGPU] != 2 || counts[tc.want] != 3 || regs != 2 || st.Unregistrations != 3 {
				t.Fatalf("states %v, %d registered, stats %+v; want 2 registered COPIED_GPU and 3 %s", counts, regs, st, tc.want)
			}
			clear(counts)
			for _, c := range u.Snapshot().Arenas[0].Chunks {
				counts[c.State]++
			}
			if counts[uma.CopiedGPU] != 2 || counts[uma.Evicted] != 3 {
				t.Fatalf("after Shed: states %v, want 2 COPIED_GPU and 3 EVICTED", counts)
			}
			// Reuse: the registered slots first, then the released ones are
			// registered again (their old bytes are not restored: they are overwritten).
			before := st.Registrations
			for i := range 3 {
				s, err := r.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Release()
				if got := r.Stats().Registrations - before; (i < 2 && got != 0) || (i == 2 && got != 1) {
					t.Fatalf("acquire %d registered %d slots", i, got)
				}
			}
		})
	}
}

// TestRingWaits: Acquire waits for a free slot and a copy waits for device
// memory under the quota; both end with their context.
func TestRingWaits(t *testing.T) {
	ctx := context.Background()
	d := devices(t)[0].open(t)
	u := newUMA(t)
	r, err := NewRing(Config{UMA: u, Device: d, SlotBytes: 4096, Slots: 2, DeviceBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.Acquire(ctx)
	b, _ := r.Acquire(ctx)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := r.Acquire(short); err == nil || !strings.Contains(err.Error(), "waiting for a free slot") {
		t.Fatalf("Acquire with every slot in use = %v", err)
	}
	pa, err := a.Copy(ctx, 4096)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.Copy(ctx, 4096) // the quota holds one buffer: it waits for pa
		got <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for r.Quota().Stats().Waits == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second copy never waited for the quota")
		}
		time.Sleep(time.Millisecond)
	}
	if err := a.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	r.PutBuffer(pa)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	b.Release() // not finished: Release waits for the copy and returns the slot
	if st := r.Stats(); st.InUse != 0 || st.DeviceBuffers != 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), "device buffers still holding batches") {
		t.Fatalf("Close with a device buffer out = %v", err)
	}
	r.PutBuffer(pa) // b's buffer is pa again (the only one)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Acquire(ctx); err == nil {
		t.Fatal("Acquire after Close succeeded")
	}
}

func TestRingConfigErrors(t *testing.T) {
	d := devices(t)[0].open(t)
	u := newUMA(t)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Device: d, SlotBytes: 1}, "required"},
		{Config{UMA: u, Device: d}, "slot size"},
		{Config{UMA: u, Device: d, SlotBytes: 1 << 20, Budget: 1 << 20}, "fewer than two staging slots"},
		{Config{UMA: u, Device: d, SlotBytes: 4096, Slots: 2, AfterCopy: "lose"}, "after-copy policy"},
		{Config{UMA: u, Device: d, SlotBytes: 8192, Slots: 2, DeviceBytes: 4096}, "smaller than one batch"},
	} {
		if _, err := NewRing(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRing(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
