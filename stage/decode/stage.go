package decode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/tensor"
)

// Encoded is what the decode stage needs from an input element.
type Encoded struct {
	// Key names the sample in errors (a file path or a shard member).
	Key string
	// Data is the encoded image (JPEG or PNG).
	Data []byte
	// Label is carried into the output (e.g. an ImageFolder class index).
	Label int64
	// Index is the sample's index in its dataset (its position in the
	// unshuffled listing, the same in every epoch) and Epoch the epoch it is
	// read in. With [Transform.Seed] they are all a random transform draws
	// from ([SampleRand]): distinct samples need distinct indices, else they
	// get the same crop and flip, which a decode stage with a random
	// transform refuses.
	Index, Epoch int64
	// Err, when set, is why the sample has nothing to decode (a tar sample
	// without the member holding its image): the stage reports it, or skips the
	// sample under its skip policy, as that sample's decode error.
	Err error
}

// StageConfig configures [NewStage].
type StageConfig struct {
	// Workers is how many samples are decoded at once (≥ 1); each worker
	// borrows one TurboJPEG handle and one [Processor].
	Workers int
	// Ordered keeps the input order (as flow.OrderedMap does) instead of
	// completion order.
	Ordered bool
	// Transform is applied after decoding.
	Transform Transform
	// CollateNormalizes, with a Transform that normalises to CHW float32,
	// leaves the samples uint8 with the normaliser's table in
	// tensor.Sample.Normalize: collate (the only consumer that may read
	// them) makes the float32 values as it writes the batch, so no float32
	// image is made per sample (a quarter of the bytes from here to collate,
	// and one pass fewer).
	CollateNormalizes bool
	// Observer, when set, is told of every image decoded (or failed).
	Observer Observer
	// Budget, when not nil, is the graph's byte budget (flow's
	// Graph.Budget()): each image's decoded bytes ([Plan.Bytes], from its
	// header) are reserved from it before anything is allocated and given
	// back once the sample is made. See [DefaultBudgetWait] for what happens
	// when the budget is full.
	Budget Budget
	// BudgetWait is how long a worker waits for its bytes in a full budget
	// before it decodes on a bounded overdraft; 0 means [DefaultBudgetWait].
	BudgetWait time.Duration
	// Skip says what a bad image does: stop the stage (the default) or be
	// skipped, logged and counted (stage.Metrics.Skipped), within limits.
	Skip stage.SkipPolicy
	// Stats, when not nil, receives the stage's reservation counters.
	Stats *ReserveStats
}

// NewStage returns a stage that decodes the elements' images with dec and
// applies cfg.Transform, producing pooled [*tensor.Sample] values. get extracts the
// encoded bytes from an input element; the graph releases the input (if it is
// a stage.Releaser) as soon as it has been decoded, successfully or not, and
// each sample when its life ends.
//
// Each image's header is read first ([Processor.Plan]): an image over the
// decoder's pixel limit is refused before anything is allocated, and the
// bytes decoding will take are reserved from cfg.Budget. A bad image (an
// unreadable header, a size over the limit, a decoding error) stops the
// stage with an error naming the sample, or, under cfg.Skip, is skipped:
// named through cfg.Skip.Log, counted, and the next sample goes on, in
// order when cfg.Ordered.
func NewStage[I any](name string, dec *Decoder, cfg StageConfig, get func(I) Encoded) (stage.Stage[I, *tensor.Sample], error) {
	if dec == nil || get == nil {
		return nil, fmt.Errorf("decode stage %q: nil decoder or accessor", name)
	}
	if cfg.Workers < 1 {
		return nil, fmt.Errorf("decode stage %q: workers %d: must be at least 1", name, cfg.Workers)
	}
	if err := cfg.Transform.Validate(); err != nil {
		return nil, fmt.Errorf("decode stage %q: %w", name, err)
	}
	if err := cfg.Transform.checkLimit(dec.MaxPixels()); err != nil {
		return nil, fmt.Errorf("decode stage %q: %w", name, dec.limitErr(err))
	}
	if cfg.BudgetWait < 0 {
		return nil, fmt.Errorf("decode stage %q: budget wait %v: must be 0 (default) or more", name, cfg.BudgetWait)
	}
	skip, err := stage.NewSkipper(cfg.Skip)
	if err != nil {
		return nil, fmt.Errorf("decode stage %q: %w", name, err)
	}
	res := &reserver{b: cfg.Budget, wait: cfg.BudgetWait, bounded: dec.MaxPixels() > 0,
		sem: make(chan struct{}, 1), stats: cfg.Stats}
	if res.wait == 0 {
		res.wait = DefaultBudgetWait
	}
	if res.stats == nil {
		res.stats = &ReserveStats{}
	}
	tr := cfg.Transform
	var table [][256]float32
	if cfg.CollateNormalizes && tr.Normalize != nil && tr.Layout == tensor.CHW {
		table, tr.Normalize = tr.Normalize.lut, nil
	}
	procs := &processorPool{dec: dec, tr: tr}
	guard := &indexGuard{on: cfg.Transform.Random()}
	samples := &tensor.SamplePool{}
	f := func(ctx context.Context, v I) (*tensor.Sample, error) {
		skip.Seen()
		enc := get(v)
		if enc.Err != nil {
			return nil, skip.Handle(enc.Key, fmt.Errorf("decode %s: %w", enc.Key, enc.Err))
		}
		p, err := procs.get()
		if err != nil {
			return nil, fmt.Errorf("decode stage %q: %w", name, err)
		}
		defer procs.put(p)
		if err := guard.check(enc); err != nil {
			return nil, fmt.Errorf("decode stage %q: %w", name, err)
		}
		plan, err := p.Plan(enc)
		if err != nil {
			return nil, skip.Handle(enc.Key, err)
		}
		release, err := res.reserve(ctx, plan.Bytes)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, skip.Handle(enc.Key, fmt.Errorf("decode %s: %w", enc.Key, err))
		}
		defer release()
		s := samples.Get()
		var start time.Time
		if cfg.Observer != nil {
			start = time.Now()
		}
		if err := p.Process(&s.Tensor, enc); err != nil {
			s.Release()
			if cfg.Observer != nil {
				cfg.Observer.ObserveDecode(len(enc.Data), 0, time.Since(start), err)
			}
			return nil, skip.Handle(enc.Key, err) // names the sample; the graph names the stage
		}
		if cfg.Observer != nil {
			cfg.Observer.ObserveDecode(len(enc.Data), s.Size(), time.Since(start), nil)
		}
		s.Key, s.Label = enc.Key, enc.Label
		if table != nil {
			if len(s.Tensor.Shape) != 3 || s.Tensor.Shape[0] != len(table) {
				s.Release()
				return nil, skip.Handle(enc.Key, fmt.Errorf("decode %s: to tensor: normalizer has %d channels, tensor %v", enc.Key, len(table), s.Tensor.Shape))
			}
			s.Normalize = table
		}
		return s, nil
	}
	return stage.Apply(name, cfg.Workers, cfg.Ordered, f), nil
}

// processorPool hands out Processors (one per concurrent worker).
type processorPool struct {
	dec  *Decoder
	tr   Transform
	mu   sync.Mutex
	free []*Processor
}

func (p *processorPool) get() (*Processor, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		pr := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return pr, nil
	}
	p.mu.Unlock()
	return NewProcessor(p.dec, p.tr)
}

// indexGuard catches an accessor that gives every sample the same
// [Encoded.Index] (one that does not set it): under a random transform
// every image of a size would get the same crop and flip. It remembers the
// first sample and refuses a later one with the same epoch and index but
// another key.
type indexGuard struct {
	on    bool
	mu    sync.Mutex
	first Encoded // Key, Index and Epoch only
	seen  bool
}

func (g *indexGuard) check(e Encoded) error {
	if !g.on {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.seen {
		g.first, g.seen = Encoded{Key: e.Key, Index: e.Index, Epoch: e.Epoch}, true
		return nil
	}
	if e.Index == g.first.Index && e.Epoch == g.first.Epoch && e.Key != g.first.Key {
		return fmt.Errorf("samples %s and %s both have index %d in epoch %d: a random transform draws from (seed, epoch, index), "+
			"so the accessor must set Encoded.Index to each sample's dataset index", g.first.Key, e.Key, e.Index, e.Epoch)
	}
	return nil
}

func (p *processorPool) put(pr *Processor) {
	p.mu.Lock()
	p.free = append(p.free, pr)
	p.mu.Unlock()
}
