//go:build linux

package uma

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRegistrationKeepsChunksFromTheKernel checks that no path gives a
// registered chunk back to the kernel, and that the chunks are eligible again
// once the registration is released.
func TestRegistrationKeepsChunksFromTheKernel(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	cs := u.ChunkSize()
	a, err := u.NewArena("staging", 4*cs, ArenaOptions{PreemptWithoutSource: true, NoHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Chunks 1 and 2 registered (the range starts inside chunk 1).
	r, err := a.Register(ctx, cs+100, cs, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Registrations(); got != 1 {
		t.Fatalf("Outstanding().Registrations = %d, want 1", got)
	}
	snap := u.Snapshot().Arenas[0].Chunks
	if snap[0].Registered != 0 || snap[1].Registered != 1 || snap[2].Registered != 1 || snap[3].Registered != 0 {
		t.Fatalf("registered counts %d %d %d %d, want 0 1 1 0", snap[0].Registered, snap[1].Registered, snap[2].Registered, snap[3].Registered)
	}

	res, err := a.MarkPreemptible(ctx, 1)
	if err != nil || res.Marked != 2 || res.Registered != 2 {
		t.Fatalf("MarkPreemptible = %+v, %v; want 2 marked, 2 skipped as registered", res, err)
	}
	res, err = a.MarkRangePreemptible(ctx, cs, cs)
	if err != nil || res.Marked != 0 || res.Registered != 1 {
		t.Fatalf("MarkRangePreemptible on a registered chunk = %+v, %v; want it skipped as registered", res, err)
	}
	if n, err := a.EvictRange(cs, 2*cs); err != nil || n != 0 {
		t.Fatalf("EvictRange on registered chunks = %d, %v; want 0", n, err)
	}
	if n, err := a.EvictTail(4 * cs); err != nil || n != 2*cs {
		t.Fatalf("EvictTail = %d, %v; want only the 2 unregistered chunks (%d bytes)", n, err, 2*cs)
	}
	if _, err := u.Shed(4 * cs); err != nil {
		t.Fatal(err)
	}
	for i, c := range u.Snapshot().Arenas[0].Chunks {
		if (i == 1 || i == 2) && c.State != Hot {
			t.Errorf("registered chunk %d is %s after mark/evict/shed, want HOT", i, c.State)
		}
	}
	if err := u.CheckNoLeases(); err == nil || !strings.Contains(err.Error(), "1 device registrations") {
		t.Errorf("CheckNoLeases with a registration = %v, want it named", err)
	}
	if err := a.Close(); !errors.Is(err, ErrLeased) {
		t.Errorf("Close with a registration = %v, want ErrLeased", err)
	}

	r.Release()
	r.Release() // ignored
	if got := u.Registrations(); got != 0 {
		t.Fatalf("after Release: Outstanding().Registrations = %d", got)
	}
	res, err = a.MarkRangePreemptible(ctx, cs, 2*cs)
	if err != nil || res.Marked != 2 {
		t.Fatalf("after Release: MarkRangePreemptible = %+v, %v; want 2 marked", res, err)
	}
}

// TestFindRegistration: devices accept only memory inside a live registration.
func TestFindRegistration(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	cs := u.ChunkSize()
	a, err := u.NewArena("ring", 2*cs, ArenaOptions{NoHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r, err := a.Register(ctx, 0, cs, false)
	if err != nil {
		t.Fatal(err)
	}
	b := r.Bytes()
	other, err := a.Lease(ctx, cs, 100, nil) // arena memory outside the registration
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	for _, tc := range []struct {
		name string
		mem  []byte
		want string // "" = found
	}{
		{"whole registration", b, ""},
		{"inside it", b[10:200], ""},
		{"Go heap", make([]byte, 4096), "not UMA arena memory"},
		{"arena memory not registered", other.Bytes(), `arena "ring" is not inside a registration`},
		{"straddling its end", a.mem[cs-10 : cs+10], `arena "ring" is not inside a registration`},
		{"empty", b[:0], "empty host range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindRegistration(tc.mem)
			if tc.want == "" {
				if err != nil || got != r {
					t.Fatalf("FindRegistration = %v, %v; want the registration", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FindRegistration = %v, %v; want an error containing %q", got, err, tc.want)
			}
		})
	}
	r.Release()
	if _, err := FindRegistration(b); err == nil {
		t.Fatal("a released registration is still found")
	}
	p, err := u.NewPool("pool", cs, ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Arena().Register(ctx, 0, cs, false); err == nil || !strings.Contains(err.Error(), "Pool.Region") {
		t.Fatalf("Register on a pool = %v, want a refusal naming Pool.Region", err)
	}
}

// TestRegisterOverwrite: a staging chunk whose bytes the kernel took can be
// registered again for overwriting, but not for reading.
func TestRegisterOverwrite(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	cs := u.ChunkSize()
	a, err := u.NewArena("staging", 2*cs, ArenaOptions{PreemptWithoutSource: true, NoHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	data := make([]byte, 2*cs)
	for i := range data {
		data[i] = byte(i%251) + 1
	}
	if err := a.Write(ctx, 0, data); err != nil {
		t.Fatal(err)
	}
	if res, err := a.MarkPreemptible(ctx, 1); err != nil || res.Marked+res.Evicted != 2 {
		t.Fatalf("MarkPreemptible = %+v, %v", res, err)
	}
	if _, err := a.PageOut(0, 2*cs); err != nil {
		t.Fatal(err)
	}
	// Chunk 0 was taken by the kernel and has no source: reading it is refused.
	if _, err := a.Register(ctx, 0, cs, false); !errors.Is(err, ErrNoRehydrate) {
		t.Fatalf("Register(overwrite=false) of a reclaimed chunk = %v, want ErrNoRehydrate", err)
	}
	// Chunk 1, to be overwritten: registered at once, HOT.
	r, err := a.Register(ctx, cs, cs, true)
	if err != nil {
		t.Fatalf("Register(overwrite=true) = %v", err)
	}
	defer r.Release()
	if st := u.Snapshot().Arenas[0].Chunks[1].State; st != Hot {
		t.Fatalf("chunk 1 is %s after an overwrite registration, want HOT", st)
	}
	copy(r.Bytes(), data[:cs])
	if res, err := a.MarkRangePreemptible(ctx, cs, cs); err != nil || res.Marked != 0 {
		t.Fatalf("MarkRangePreemptible on the registered chunk = %+v, %v", res, err)
	}
	if string(r.Bytes()) != string(data[:cs]) {
		t.Fatal("registered bytes changed")
	}
}
