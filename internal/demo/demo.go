package demo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/pipelines/progress"
)

// Config sizes the demo.
type Config struct {
	Items     int   // samples to generate
	ItemBytes int   // bytes per sample (the "encoded" payload)
	Workers   int   // decode workers
	BatchSize int   // samples per batch
	Budget    int64 // byte budget of the graph
	Seed      uint64
	Graph     GraphHooks
}

// GraphHooks let the caller add graph options (metrics) and a runtime (the
// memory runtime with its pressure gate), which then holds the budget. The zero
// value runs the graph plainly on a budget of Config.Budget bytes.
type GraphHooks struct {
	Options []flow.Option
	Runtime flow.Runtime
}

// DefaultConfig is what "make run" uses.
func DefaultConfig() Config {
	return Config{Items: 20000, ItemBytes: 64 << 10, Workers: runtime.GOMAXPROCS(0), BatchSize: 64, Budget: 64 << 20, Seed: 1}
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Items < 1:
		return fmt.Errorf("items %d: must be at least 1", c.Items)
	case c.ItemBytes < 16:
		return fmt.Errorf("item size %d bytes: must be at least 16", c.ItemBytes)
	case c.Workers < 1:
		return fmt.Errorf("workers %d: must be at least 1", c.Workers)
	case c.BatchSize < 1:
		return fmt.Errorf("batch size %d: must be at least 1", c.BatchSize)
	case c.Budget < int64(c.ItemBytes)*5:
		// A sample holds its payload and then its decoded tensor (4× bigger).
		return fmt.Errorf("budget %d bytes: must hold at least one sample, %d bytes (payload plus decoded float32 tensor)", c.Budget, int64(c.ItemBytes)*5)
	}
	return nil
}

// sample is one generated, "encoded" element: bytes from a pool and the
// checksum taken when they were made, checked after decoding.
type sample struct {
	id   int
	data []byte
	sum  uint64
	pool *sync.Pool
}

func (s *sample) Size() int64 { return int64(len(s.data)) }

// Release returns the payload buffer to its pool.
func (s *sample) Release() {
	if b := s.data; b != nil {
		s.data = nil
		s.pool.Put(&b)
	}
}

// tensor is a decoded sample: float32 values normalised to [0, 1].
type tensor struct {
	id     int
	values []float32
	pool   *sync.Pool
}

func (t *tensor) Release() {
	if v := t.values; v != nil {
		t.values = nil
		t.pool.Put(&v)
	}
}

// Summary is the result of a run (shared by every shipped pipeline).
type Summary = progress.Summary

// Snapshot is a live view for progress displays.
type Snapshot = progress.Snapshot

// Run builds and runs the demo graph. show, if not nil, is called about
// every interval with a snapshot, from another goroutine that ends before Run
// returns.
func Run(ctx context.Context, cfg Config, interval time.Duration, show func(Snapshot)) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	budget := flow.WithBudget(cfg.Budget)
	if cfg.Graph.Runtime != nil {
		budget = flow.WithRuntime(cfg.Graph.Runtime)
	}
	g := flow.New("demo", append([]flow.Option{budget}, cfg.Graph.Options...)...)
	payloads := &sync.Pool{New: func() any { b := make([]byte, cfg.ItemBytes); return &b }}
	tensors := &sync.Pool{New: func() any { v := make([]float32, cfg.ItemBytes); return &v }}

	gen := flow.Source(g, "generate", func(ctx context.Context, out *flow.Emitter[*sample]) error {
		rng := rand.New(rand.NewPCG(cfg.Seed, 0))
		for i := range cfg.Items {
			// Payload and decoded tensor are reserved up front (two-phase:
			// budget first, then buffers).
			if err := out.Reserve(ctx, int64(cfg.ItemBytes)*5); err != nil {
				return err
			}
			buf := *(payloads.Get().(*[]byte))
			for j := 0; j+8 <= len(buf); j += 8 {
				v := rng.Uint64()
				buf[j], buf[j+1], buf[j+2], buf[j+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
				buf[j+4], buf[j+5], buf[j+6], buf[j+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
			}
			s := &sample{id: i, data: buf, sum: xxh3.Hash(buf), pool: payloads}
			if err := out.Emit(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	decoded := flow.OrderedMap(gen, "decode", cfg.Workers, func(_ context.Context, s *sample) (*tensor, error) {
		if xxh3.Hash(s.data) != s.sum {
			return nil, fmt.Errorf("sample %d: checksum mismatch", s.id)
		}
		vals := *(tensors.Get().(*[]float32))
		for j, b := range s.data {
			vals[j] = float32(math.Sqrt(float64(b))) / 16 // stand-in for real decode work
		}
		return &tensor{id: s.id, values: vals, pool: tensors}, nil
	})
	batches := flow.Batch(decoded, "batch", cfg.BatchSize, 50*time.Millisecond)

	var items, nbatches, nbytes int64
	var mu sync.Mutex
	next := 0
	flow.Sink(batches, "consume", func(_ context.Context, b []*tensor) error {
		mu.Lock()
		defer mu.Unlock()
		for _, t := range b {
			if t.id != next {
				return fmt.Errorf("sample %d arrived where %d was expected: order lost", t.id, next)
			}
			next++
			items++
			nbytes += int64(cfg.ItemBytes)
		} // the graph releases the batch's tensors when this returns
		nbatches++
		return nil
	})

	start := time.Now()
	stop := progress.Report(interval, show, func() Snapshot {
		mu.Lock()
		snap := Snapshot{Items: items, Bytes: nbytes}
		mu.Unlock()
		snap.Elapsed = time.Since(start)
		snap.Observe(g)
		return snap
	})
	err := g.Run(ctx)
	stop()
	sum := Summary{Items: items, Batches: nbatches, Bytes: nbytes, Elapsed: time.Since(start), Peak: g.Budget().MaxInUse(), Stages: g.Stats()}
	if err == nil && items != int64(cfg.Items) {
		err = errors.New("demo: fewer samples arrived than were generated")
	}
	return sum, err
}
