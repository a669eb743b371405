//go:build linux

package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// revocablePool is a Pool whose registration the test revokes.
type revocablePool struct {
	*Pool
	revoke       chan struct{}
	once         sync.Once
	unregistered atomic.Int64
}

func (p *revocablePool) Revoked() <-chan struct{} { return p.revoke }
func (p *revocablePool) Unregistered()            { p.unregistered.Add(1) }
func (p *revocablePool) revokeNow()               { p.once.Do(func() { close(p.revoke) }) }

// holdGate admits reads until hold, then none until let.
type holdGate struct {
	mu      sync.Mutex
	held    bool
	resumed chan struct{}
}

func (g *holdGate) Acquire(ctx context.Context) error {
	g.mu.Lock()
	held, c := g.held, g.resumed
	g.mu.Unlock()
	if !held {
		return nil
	}
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (g *holdGate) Release() {}
func (g *holdGate) hold() {
	g.mu.Lock()
	g.held, g.resumed = true, make(chan struct{})
	g.mu.Unlock()
}
func (g *holdGate) let() {
	g.mu.Lock()
	g.held = false
	close(g.resumed)
	g.mu.Unlock()
}

// TestFilesUnregisterARevokedPoolWhileIdle: the provider revokes its registered
// region in the middle of an epoch while no read is admitted (a paused loader);
// every io_uring reader that registered it unregisters it once its reads in
// flight are done, without waiting for more reads or for the epoch's end, and
// the epoch still delivers every file once, in order, with its bytes (read into
// the same memory without fixed buffers). Asserted on the provider's count.
func TestFilesUnregisterARevokedPoolWhileIdle(t *testing.T) {
	if r := uringReason(); r != "" {
		t.Skipf("io_uring unavailable: %s", r)
	}
	const n, workers = 120, 2
	paths := writeNumbered(t, n)
	ds := NewFiles(paths)
	pool, err := NewPool(64, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	prov := &revocablePool{Pool: pool, revoke: make(chan struct{})}
	gate := &holdGate{}
	it, err := ds.Samples(Options{WorldSize: 1, Workers: workers, Buffers: prov, Gate: gate,
		Reader: ReaderOptions{Backend: BackendURing, QueueDepth: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := 0
	read := func() (bool, error) {
		s, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		defer s.Release()
		if s.Key != paths[next] || string(s.Fields[0].Data) != paths[next] {
			return false, fmt.Errorf("sample %d: key %s holding %q, want %s holding its own path", next, s.Key, s.Fields[0].Data, paths[next])
		}
		next++
		return true, nil
	}
	for range 20 {
		if _, err := read(); err != nil {
			t.Fatal(err)
		}
	}
	gate.hold()
	prov.revokeNow()
	// The consumer goes on taking what was admitted before the hold.
	done := make(chan error, 1)
	go func() {
		for {
			more, err := read()
			if err != nil || !more {
				done <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for prov.unregistered.Load() < workers {
		if time.Now().After(deadline) {
			gate.let()
			<-done
			t.Fatalf("%d of %d readers unregistered the revoked region within 30 s of the revocation, with no read admitted",
				prov.unregistered.Load(), workers)
		}
		time.Sleep(5 * time.Millisecond)
	}
	gate.let()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if next != n {
		t.Fatalf("%d of %d samples delivered", next, n)
	}
	if u := prov.unregistered.Load(); u != workers {
		t.Errorf("%d unregistrations, want one per reader (%d)", u, workers)
	}
}

// vmPinKiB is VmPin of /proc/self/status in KiB (the pages io_uring pinned).
func vmPinKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmPin:" {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Skip("no VmPin in /proc/self/status")
	return 0
}

// TestTarUnregistersItsChunkPoolWhenRevoked: a tar iterator's chunk pool is
// its own, registered with its ring; when the dataset's Buffers provider
// revokes (a paused loader), the read-ahead waiting at the gate lands its
// reads, unregisters the pool (VmPin falls by the pool's size) and gives its
// free slots back, without another read admitted; the epoch still delivers
// every sample once, in order, with its bytes. Asserted on VmPin and the keys.
func TestTarUnregistersItsChunkPoolWhenRevoked(t *testing.T) {
	if r := uringReason(); r != "" {
		t.Skipf("io_uring unavailable: %s", r)
	}
	const n, chunk = 300, 64 << 10
	p := writeShard(t, buildTar(t, samples(0, n), true))
	fields, err := NewPool(64, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer fields.Close()
	prov := &revocablePool{Pool: fields, revoke: make(chan struct{})}
	gate := &holdGate{}
	before := vmPinKiB(t)
	it, err := NewTar([]string{p}).Samples(Options{WorldSize: 1, Buffers: prov, Gate: gate, ChunkSize: chunk,
		Reader: ReaderOptions{Backend: BackendURing, QueueDepth: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	pool := int64((2*4 + 2) * chunk >> 10) // the chunk pool: 2 × depth + 2 slots
	if got := vmPinKiB(t) - before; got < pool {
		t.Skipf("the chunk pool is not pinned here (VmPin +%d KiB, pool %d KiB): nothing to unregister", got, pool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := 0
	read := func() (bool, error) {
		s, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		defer s.Release()
		if want := fmt.Sprintf("k%03d", next); s.Key != want || !bytes.Equal(s.Field("jpg"), bytes.Repeat([]byte{byte(next)}, 100+next)) {
			return false, fmt.Errorf("sample %d: key %s, want %s with its bytes", next, s.Key, want)
		}
		next++
		return true, nil
	}
	for range 20 {
		if _, err := read(); err != nil {
			t.Fatal(err)
		}
	}
	gate.hold()
	prov.revokeNow()
	done := make(chan error, 1)
	go func() {
		for {
			more, err := read()
			if err != nil || !more {
				done <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for vmPinKiB(t)-before >= pool {
		if time.Now().After(deadline) {
			gate.let()
			<-done
			t.Fatalf("VmPin still %d KiB above the start 30 s after the revocation, with no read admitted (pool %d KiB)", vmPinKiB(t)-before, pool)
		}
		time.Sleep(5 * time.Millisecond)
	}
	gate.let()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if next != n {
		t.Fatalf("%d of %d samples delivered", next, n)
	}
}
