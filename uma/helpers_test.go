package uma

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// faultKernel wraps the real system calls and injects errors, like pebble's
// errorfs: the error paths run against the real kernel otherwise.
type faultKernel struct {
	kernel
	mu         sync.Mutex
	freeErr    error // returned by madvise(MADV_FREE)
	mlockErr   error // returned by mlock
	mlockCalls int
}

func (f *faultKernel) madvise(b []byte, a advice) error {
	f.mu.Lock()
	err := f.freeErr
	f.mu.Unlock()
	if a == adviseFree && err != nil {
		return fmt.Errorf("madvise(%s): %w", a, err)
	}
	return f.kernel.madvise(b, a)
}

func (f *faultKernel) mlock(b []byte) error {
	f.mu.Lock()
	f.mlockCalls++
	err := f.mlockErr
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("mlock: %w", err)
	}
	return f.kernel.mlock(b)
}

// testBudget is a byte budget like flow.Budget: Acquire blocks while the
// limit would be exceeded.
type testBudget struct {
	mu     sync.Mutex
	limit  int64
	inUse  int64
	peak   int64
	notify chan struct{}
}

func newTestBudget(limit int64) *testBudget { return &testBudget{limit: limit} }

func (b *testBudget) Acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.inUse+n <= b.limit || b.inUse == 0 {
			b.inUse += n
			b.peak = max(b.peak, b.inUse)
			b.mu.Unlock()
			return nil
		}
		if b.notify == nil {
			b.notify = make(chan struct{})
		}
		w := b.notify
		b.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *testBudget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inUse -= n
	if b.inUse < 0 {
		panic("testBudget: released more than acquired")
	}
	if b.notify != nil {
		close(b.notify)
		b.notify = nil
	}
}

func (b *testBudget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}

// logBuffer is a concurrency-safe slog destination.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// atomicRehydrate is patternRehydrate for concurrent tests.
type atomicRehydrate struct{ calls atomic.Int64 }

func (p *atomicRehydrate) fn(ctx context.Context, id ChunkID, dst []byte) error {
	p.calls.Add(1)
	fillPattern(id, dst)
	return nil
}

func unsafeAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
