package imagefolder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/source/umabuf"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/uma"
)

// Extensions are the file names the pipeline reads.
var Extensions = []string{".jpg", ".jpeg", ".JPEG", ".png"}

// Config sizes the image-folder pipeline. [DefaultConfig] gives the values "make run"
// uses; [Config.Validate] names the first bad field.
type Config struct {
	Dir       string         // folder of .jpg/.jpeg/.png files, searched recursively
	Workers   int            // decode workers
	Readers   int            // file readers; 0: package source's default
	BatchSize int            // samples per batch
	Resize    int            // shorter side after Resize
	Crop      int            // CenterCrop size
	Queue     int            // default edge queue size (elements); batch edges hold 1
	Budget    int64          // bytes in flight from read to decode
	Epochs    int            // passes over the folder
	Limit     int64          // stop after this many samples; 0: all
	Ordered   bool           // keep file order through decoding
	DropCache bool           // drop each file's page cache once read
	Labels    bool           // label each sample with its ImageFolder class index
	Backend   decode.Backend // JPEG decoder
	// ReadBuffers is the size of the UMA pool the reader reads into, registered once
	// with every io_uring ring; 0 uses package source's own buffer pool instead.
	ReadBuffers int64
	// OnError is what a bad image does: stage.Stop (default) ends the run with an
	// error naming it; stage.Skip drops it, names it through Hooks.Skipped and counts
	// it (Summary.Skipped, psiflow_stage_skipped_total), within MaxSkips and MaxSkipRate.
	OnError stage.OnError
	// MaxSkips is the most images skipped per epoch under stage.Skip; 0: no limit.
	MaxSkips int64
	// MaxSkipRate is the largest fraction of an epoch's images that may be skipped
	// (measured over at least stage.RateFloor of them); 0: no limit.
	MaxSkipRate float64
	// MaxPixels refuses images larger than this (width × height) from their header,
	// before decoding; 0: decode.DefaultMaxPixels (Pillow's limit), negative: none.
	MaxPixels int64
}

// DefaultConfig is what "make run" uses on the generated folder dir.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, Workers: runtime.GOMAXPROCS(0), BatchSize: 64, Resize: 256, Crop: 224, Queue: 4,
		Budget: 32 << 20, Epochs: 1, DropCache: true, Labels: true, ReadBuffers: 64 << 20}
}

// Validate reports the first field that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("imagefolder: no folder given")
	case c.Workers < 1:
		return fmt.Errorf("imagefolder: workers %d: must be at least 1", c.Workers)
	case c.Readers < 0:
		return fmt.Errorf("imagefolder: readers %d: must be 0 (default) or more", c.Readers)
	case c.BatchSize < 1:
		return fmt.Errorf("imagefolder: batch size %d: must be at least 1", c.BatchSize)
	case c.Resize < 1 || c.Crop < 1:
		return fmt.Errorf("imagefolder: resize %d, crop %d: both must be at least 1", c.Resize, c.Crop)
	case c.Queue < 1:
		return fmt.Errorf("imagefolder: queue %d: must be at least 1", c.Queue)
	case c.Budget <= 0:
		return fmt.Errorf("imagefolder: budget %d bytes: must be positive", c.Budget)
	case c.Epochs < 1:
		return fmt.Errorf("imagefolder: epochs %d: must be at least 1", c.Epochs)
	case c.Limit < 0:
		return fmt.Errorf("imagefolder: limit %d: must be 0 (all) or more", c.Limit)
	case c.ReadBuffers < 0:
		return fmt.Errorf("imagefolder: read buffers %d bytes: must be 0 (off) or more", c.ReadBuffers)
	}
	if err := c.skipPolicy(nil).Validate(); err != nil {
		return fmt.Errorf("imagefolder: %w", err)
	}
	limit := c.MaxPixels
	if limit == 0 {
		limit = decode.DefaultMaxPixels
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"resize", c.Resize}, {"crop", c.Crop}} {
		if n := int64(f.n); limit > 0 && n > limit/n {
			return fmt.Errorf("imagefolder: %s %d: %d×%d pixels exceed the pixel limit of %d", f.name, f.n, n, n, limit)
		}
	}
	return nil
}

func (c Config) skipPolicy(log func(key string, err error)) stage.SkipPolicy {
	return stage.SkipPolicy{OnError: c.OnError, MaxSkips: c.MaxSkips, MaxRate: c.MaxSkipRate, Log: log}
}

// Hooks let the caller add to a run: graph options (a pressure gate, metrics), its
// own way of running the graph (under a pressure monitor), the consumer of batches,
// informational lines and live progress. The zero value runs plainly and drops the
// batches.
type Hooks struct {
	Options []flow.Option
	Run     func(ctx context.Context, g *flow.Graph) error
	// Consume receives every batch; the graph releases the batch when it returns.
	Consume func(ctx context.Context, b *decode.Batch) error
	// Info receives one line for each choice made at start (reader, decoder, buffers).
	Info func(string)
	// Progress, when not nil, is called about every Interval from another goroutine
	// that ends before Run returns.
	Progress func(progress.Snapshot)
	Interval time.Duration
	// Skipped receives every image skipped under Config.OnError = stage.Skip, from
	// a decode worker; nil writes "psiflow: skipped a bad sample: CAUSE" (which names it)
	// to standard error.
	Skipped func(key string, err error)
}

func (h Hooks) info(format string, args ...any) {
	if h.Info != nil {
		h.Info(fmt.Sprintf(format, args...))
	}
}

// errLimit ends a graph once Config.Limit samples were delivered.
var errLimit = errors.New("sample limit reached")

// Run runs the pipeline once per epoch and returns what it delivered.
func Run(ctx context.Context, cfg Config, hooks Hooks) (res progress.Summary, err error) {
	if err := cfg.Validate(); err != nil {
		return progress.Summary{}, err
	}
	files, err := source.Dir(cfg.Dir, Extensions...)
	if err != nil {
		return progress.Summary{}, err
	}
	labelOf := func(string) int64 { return -1 }
	if cfg.Labels {
		if labelOf, err = ClassIndex(cfg.Dir); err != nil {
			return progress.Summary{}, err
		}
	}
	dec, err := decode.NewDecoder(decode.Options{Backend: cfg.Backend, MaxPixels: cfg.MaxPixels})
	if err != nil {
		return progress.Summary{}, err
	}
	defer dec.Close()
	if st := source.IOStatus(); st.Reason != "" {
		hooks.info("reader: %s (%s)", st.Backend, st.Reason)
	} else {
		hooks.info("reader: %s", st.Backend)
	}
	if why := dec.FallbackReason(); why != nil {
		hooks.info("JPEG decoder: Go standard library (%v)", why)
	} else {
		hooks.info("JPEG decoder: %s", dec.Backend())
	}
	var bufs source.BufferProvider
	if cfg.ReadBuffers > 0 {
		u, err := uma.New(uma.Config{})
		if err != nil {
			return progress.Summary{}, err
		}
		pool, err := u.NewPool("read-buffers", cfg.ReadBuffers, uma.ArenaOptions{Registered: true})
		if err != nil {
			u.Close()
			return progress.Summary{}, err
		}
		if bufs, err = umabuf.New(pool); err != nil {
			pool.Close()
			u.Close()
			return progress.Summary{}, err
		}
		defer func() {
			// Close fails if any lease is still out: a leak would surface here.
			err = errors.Join(err, pool.Close(), u.Close())
		}()
		hooks.info("read buffers: a %d MiB UMA pool registered with the rings", cfg.ReadBuffers>>20)
	}

	var sum progress.Summary
	var mu sync.Mutex
	start := time.Now()
	var current *flow.Graph
	stop := progress.Report(hooks.Interval, hooks.Progress, func() progress.Snapshot {
		mu.Lock()
		snap := progress.Snapshot{Items: sum.Items, Bytes: sum.Bytes, Elapsed: time.Since(start)}
		g := current
		mu.Unlock()
		snap.Observe(g)
		return snap
	})
	defer stop()
	defer func() { res.Elapsed = time.Since(start) }() // on the returned copy

	get := func(s *source.Sample) decode.Encoded {
		e := decode.Encoded{Key: s.Key, Label: labelOf(s.Key)}
		if len(s.Fields) > 0 {
			e.Data = s.Fields[0].Data
		}
		mu.Lock()
		sum.Bytes += int64(len(e.Data))
		mu.Unlock()
		return e
	}
	skipped := hooks.Skipped
	if skipped == nil {
		skipped = func(key string, err error) {
			if strings.Contains(err.Error(), key) {
				fmt.Fprintf(os.Stderr, "psiflow: skipped a bad sample: %v\n", err)
			} else {
				fmt.Fprintf(os.Stderr, "psiflow: skipped bad sample %s: %v\n", key, err)
			}
		}
	}
	for epoch := range cfg.Epochs {
		g := flow.New("imagefolder", append([]flow.Option{flow.WithBudget(cfg.Budget), flow.WithQueueSize(cfg.Queue)}, hooks.Options...)...)
		// decoded bytes are reserved from the graph's budget before decoding
		st, err := decode.NewStage("decode", dec, decode.StageConfig{
			Workers: cfg.Workers, Ordered: cfg.Ordered,
			Transform: decode.Transform{Resize: cfg.Resize, CenterCrop: cfg.Crop, Layout: decode.CHW},
			Budget:    g.Budget(), Skip: cfg.skipPolicy(skipped),
		}, get)
		if err != nil {
			return sum, err
		}
		src := flowsrc.Files(g, "read", files, source.Options{
			Epoch: epoch, Workers: cfg.Readers, Buffers: bufs,
			Reader: source.ReaderOptions{DropCache: cfg.DropCache},
		})
		batches := flow.Via(flow.Via(src, st), stage.Batch[*decode.Sample]("batch", cfg.BatchSize, 0), flow.QueueSize(1))
		collated := flow.Via(batches, decode.Collate("collate"), flow.QueueSize(1))
		flow.Sink(collated, "consume", func(ctx context.Context, b *decode.Batch) error {
			mu.Lock()
			sum.Items += int64(len(b.Keys))
			sum.Batches++
			done := cfg.Limit > 0 && sum.Items >= cfg.Limit
			mu.Unlock()
			if hooks.Consume != nil {
				if err := hooks.Consume(ctx, b); err != nil {
					return err
				}
			}
			if done {
				return errLimit
			}
			return nil
		})
		mu.Lock()
		current = g
		epochStart := sum.Items
		mu.Unlock()
		if hooks.Run != nil {
			err = hooks.Run(ctx, g)
		} else {
			err = g.Run(ctx)
		}
		mu.Lock()
		sum.Stages = g.Stats()
		sum.Peak = max(sum.Peak, g.Budget().MaxInUse())
		var skippedNow int64
		for _, s := range sum.Stages {
			skippedNow += s.Skipped
		}
		sum.Skipped += skippedNow
		mu.Unlock()
		if errors.Is(err, errLimit) {
			return sum, nil
		}
		if err != nil {
			return sum, err
		}
		if skippedNow > 0 && sum.Items == epochStart {
			// skipping is for a few bad files, not for a dataset that cannot be read
			return sum, fmt.Errorf("imagefolder: epoch %d: every one of the %d samples was skipped as bad (see the skipped lines)", epoch, skippedNow)
		}
	}
	return sum, nil
}

// ClassIndex returns ImageFolder's labelling of root: the index of a file's top-level
// directory among the sorted class directories of root (-1 for files outside one).
func ClassIndex(root string) (func(path string) int64, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var classes []string
	for _, e := range entries {
		if e.IsDir() {
			classes = append(classes, e.Name())
		}
	}
	sort.Strings(classes)
	idx := make(map[string]int64, len(classes))
	for i, name := range classes {
		idx[name] = int64(i)
	}
	return func(path string) int64 {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return -1
		}
		first, _, ok := strings.Cut(rel, string(filepath.Separator))
		if !ok {
			return -1
		}
		if i, ok := idx[first]; ok {
			return i
		}
		return -1
	}, nil
}
