//go:build linux

package source

import (
	"context"
	"errors"
	"fmt"
	"io"
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
