package stage

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// Metrics are one stage's counters. The graph creates them, the stage's ports
// and combinators update them, and package flow exports them. All fields are
// safe for concurrent use.
type Metrics struct {
	_         [64]byte     // keeps neighbouring stages' counters off this cache line
	ItemsIn   atomic.Int64 // elements received
	ItemsOut  atomic.Int64 // elements sent
	Errors    atomic.Int64 // errors returned by the stage (at most one per run, plus dropped ones)
	BytesIn   atomic.Int64 // bytes received (from claims, or Size for Sized values)
	BytesOut  atomic.Int64 // bytes sent
	WaitIn    atomic.Int64 // nanoseconds spent blocked waiting for input
	WaitOut   atomic.Int64 // nanoseconds spent blocked waiting for room downstream
	Workers   atomic.Int64 // goroutines doing the stage's work
	startNano atomic.Int64
	endNano   atomic.Int64
	_         [64]byte
}

// epoch anchors Metrics' monotonic clock.
var epoch = time.Now()

// nanotime is a monotonic clock in nanoseconds since epoch.
func nanotime() int64 { return int64(time.Since(epoch)) }

// Start records that the stage began running with the given number of workers.
func (m *Metrics) Start(workers int) {
	m.Workers.Store(int64(workers))
	m.startNano.Store(nanotime())
}

// Stop records that the stage ended.
func (m *Metrics) Stop() { m.endNano.Store(nanotime()) }

// Busy is the time the stage's workers spent neither waiting for input nor
// for output: worker lifetime minus waits (a port yields the processor once
// before it parks; that brief yield counts as busy). A stage whose busy time grows as
// fast as the wall clock (per worker) is the graph's bottleneck.
func (m *Metrics) Busy() time.Duration {
	start := m.startNano.Load()
	if start == 0 {
		return 0
	}
	end := m.endNano.Load()
	if end == 0 {
		end = nanotime()
	}
	busy := (end-start)*m.Workers.Load() - m.WaitIn.Load() - m.WaitOut.Load()
	if busy < 0 {
		busy = 0
	}
	return time.Duration(busy)
}

// In is a stage's typed input port. Its zero value is not usable; graphs make
// ports with [NewIn].
type In[T any] struct {
	ch      <-chan Envelope[T]
	m       *Metrics
	sized   bool
	release bool
}

// NewIn returns an input port reading ch and counting into m.
func NewIn[T any](ch <-chan Envelope[T], m *Metrics) In[T] {
	return In[T]{ch: ch, m: m, sized: MaySize[T](), release: MayRelease[T]()}
}

// Recv returns the next element. ok is false when the input is closed and
// drained, or when ctx is done; the stage should then return (the graph
// reports the cancellation).
func (in In[T]) Recv(ctx context.Context) (e Envelope[T], ok bool) {
	select {
	case e, ok = <-in.ch:
	default:
		// Yield once before parking: the producer is often runnable, and a
		// select that parks on two channels costs more than a reschedule.
		runtime.Gosched()
		select {
		case e, ok = <-in.ch:
			if ok {
				in.Count(e)
			}
			return e, ok
		default:
		}
		t0 := nanotime()
		select {
		case e, ok = <-in.ch:
		case <-ctx.Done():
		}
		in.m.WaitIn.Add(nanotime() - t0)
	}
	if ok {
		in.Count(e)
	}
	return e, ok
}

// C exposes the underlying channel for stages that must select on it with
// other events (a batch's timer). Such stages call [In.Count] for every
// element they take and [In.Waited] for the time they spent blocked.
func (in In[T]) C() <-chan Envelope[T] { return in.ch }

// Count records one received element.
func (in In[T]) Count(e Envelope[T]) {
	in.m.ItemsIn.Add(1)
	if b := e.Claim.Bytes(); b > 0 {
		in.m.BytesIn.Add(b)
	} else if in.sized {
		in.m.BytesIn.Add(SizeOf(e.Value))
	}
}

// Discard ends e's life like [Discard], skipping the per-element type check
// when T cannot be a [Releaser].
func (in In[T]) Discard(e Envelope[T]) {
	if in.release {
		ReleaseValue(e.Value)
	}
	e.Claim.Drop()
}

// Waited records time spent blocked on input outside [In.Recv].
func (in In[T]) Waited(d time.Duration) { in.m.WaitIn.Add(int64(d)) }

// Metrics returns the stage's counters.
func (in In[T]) Metrics() *Metrics { return in.m }

// Out is a stage's typed output port.
type Out[T any] struct {
	ch      chan<- Envelope[T]
	m       *Metrics
	sized   bool
	release bool
}

// NewOut returns an output port writing ch and counting into m.
func NewOut[T any](ch chan<- Envelope[T], m *Metrics) Out[T] {
	return Out[T]{ch: ch, m: m, sized: MaySize[T](), release: MayRelease[T]()}
}

// Send passes e downstream, waiting for room. If ctx ends first, e is
// discarded (its claim dropped, its value released) and ctx's error returned,
// so nothing leaks.
func (o Out[T]) Send(ctx context.Context, e Envelope[T]) error {
	// Sized before sending: once queued, the value belongs to the receiver, which
	// may release and reuse it at once.
	bytes := e.Claim.Bytes()
	if bytes <= 0 && o.sized {
		bytes = SizeOf(e.Value)
	}
	select {
	case o.ch <- e:
	default:
		runtime.Gosched()
		select {
		case o.ch <- e:
			goto sent
		default:
		}
		t0 := nanotime()
		select {
		case o.ch <- e:
		case <-ctx.Done():
			o.m.WaitOut.Add(nanotime() - t0)
			if o.release {
				ReleaseValue(e.Value)
			}
			e.Claim.Drop()
			return ctx.Err()
		}
		o.m.WaitOut.Add(nanotime() - t0)
	}
sent:
	o.m.ItemsOut.Add(1)
	if bytes > 0 {
		o.m.BytesOut.Add(bytes)
	}
	return nil
}

// Metrics returns the stage's counters.
func (o Out[T]) Metrics() *Metrics { return o.m }
