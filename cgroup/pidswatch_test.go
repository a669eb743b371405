package cgroup

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type fakePids struct {
	mu  sync.Mutex
	n   uint64
	err error
}

func (f *fakePids) PidsEvents() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.err
}

func (f *fakePids) add(d uint64) { f.mu.Lock(); f.n += d; f.mu.Unlock() }

func TestWatchPids(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakePids{n: 5} // failures before the watch are the baseline
		type call struct{ total, delta uint64 }
		var mu sync.Mutex
		var calls []call
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- WatchPids(ctx, f, 100*time.Millisecond, func(total, delta uint64) {
				mu.Lock()
				calls = append(calls, call{total, delta})
				mu.Unlock()
			})
		}()
		synctest.Wait()
		time.Sleep(350 * time.Millisecond) // three polls, no change
		f.add(2)
		time.Sleep(100 * time.Millisecond)
		f.add(1)
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("WatchPids = %v", err)
		}
		want := []call{{7, 2}, {8, 1}}
		if len(calls) != len(want) || calls[0] != want[0] || calls[1] != want[1] {
			t.Errorf("calls = %v, want %v", calls, want)
		}
	})
}

func TestWatchPidsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakePids{err: errors.New("gone")}
		if err := WatchPids(t.Context(), f, 0, func(uint64, uint64) {}); !errors.Is(err, f.err) {
			t.Errorf("WatchPids = %v", err)
		}
	})
}
