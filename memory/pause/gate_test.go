package pause

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// countGate counts the permits taken and given back.
type countGate struct{ acquired, released atomic.Int32 }

func (c *countGate) Acquire(context.Context) error { c.acquired.Add(1); return nil }
func (c *countGate) Release()                      { c.released.Add(1) }

func TestGatePausesAndResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &countGate{}
		g := NewGate(inner)
		ctx := context.Background()
		if err := g.Acquire(ctx); err != nil || inner.acquired.Load() != 1 {
			t.Fatalf("unpaused Acquire: %v, inner acquired %d", err, inner.acquired.Load())
		}
		g.Release()
		g.Pause()
		g.Pause() // twice is once
		done := make(chan error, 3)
		for range 3 {
			go func() { done <- g.Acquire(ctx) }()
		}
		synctest.Wait()
		if g.Waiting() != 3 || len(done) != 0 || inner.acquired.Load() != 1 {
			t.Fatalf("while paused: %d waiting, %d returned, inner acquired %d; want 3 held, none through", g.Waiting(), len(done), inner.acquired.Load())
		}
		time.Sleep(time.Hour) // no trickle, however long the pause
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("an Acquire went through a paused gate")
		}
		g.Resume()
		for range 3 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if inner.acquired.Load() != 4 || g.Waiting() != 0 || g.Paused() {
			t.Errorf("after resume: inner acquired %d, waiting %d, paused %v", inner.acquired.Load(), g.Waiting(), g.Paused())
		}
	})
}

func TestGateCancelledWhilePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(nil)
		g.Pause()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Acquire(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire = %v, want context.Canceled", err)
		}
		if g.Waiting() != 0 {
			t.Errorf("%d still waiting", g.Waiting())
		}
		g.Resume()
		g.Resume() // twice is once
		if err := g.Acquire(context.Background()); err != nil {
			t.Error(err)
		}
		g.Release()
	})
}
