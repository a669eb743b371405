package imagefolder

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/pressure"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/umabuf"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/uma"
	"github.com/psiflow/psiflow/uma/umacache"
)

// Extensions are the file names the pipeline reads.
var Extensions = []string{".jpg", ".jpeg", ".JPEG", ".png"}

// Config sizes the image-folder pipeline. [DefaultConfig] gives the values "make run"
// uses; [Config.Validate] names the first bad field.
type Config struct {
	Dir       string // folder of .jpg/.jpeg/.png files, searched recursively
	Workers   int    // decode workers
	Readers   int    // file readers; 0: package source's default
	BatchSize int    // samples per batch
	Resize    int    // shorter side after Resize
	Crop      int    // CenterCrop size
	Queue     int    // default edge queue size (elements); batch edges hold 1
	Budget    int64  // bytes in flight from read to decode
	Epochs    int    // passes over the folder
	Limit     int64  // stop after this many samples; 0: all
	Ordered   bool   // keep file order through decoding
	Shuffle   bool   // shuffle the file order every epoch (seeded by Seed and the epoch)
	Seed      uint64 // seed of the shuffle

	// Rank and WorldSize shard the folder as DistributedSampler does (0 and 0:
	// not sharded); a front-end that follows torchrun passes source.EnvSharding's.
	Rank, WorldSize int
	// DropLast cuts the end of each epoch so every rank reads the same number of
	// files; without it the epoch is padded by repeating its first files.
	DropLast bool
	// StartEpoch numbers the first epoch (its shuffle is that epoch's), and
	// StartAt resumes it at that global offset (source.Position.Consumed): the
	// run delivers the rest of epoch StartEpoch, then Epochs-1 more.
	StartEpoch int
	StartAt    int64
	// Transform, when not nil, replaces Resize and Crop: the training transform
	// (decode.Transform's RandomResizedCrop, FlipProb, Normalize), each sample's
	// draws from (Transform.Seed, epoch, the sample's dataset index). Random
	// transforms and normalised output cannot be cached.
	Transform *decode.Transform

	DropCache bool // drop each file's page cache once read
	// Direct reads with O_DIRECT, past the page cache: the reads charge nothing to
	// the cgroup beyond their buffers, so a loader at its limit beside a co-tenant
	// does not make the kernel reclaim for every file. A file system that refuses
	// O_DIRECT (tmpfs) is read buffered, and the run says so at start.
	Direct  bool
	Labels  bool           // label each sample with its ImageFolder class index
	Backend decode.Backend // JPEG decoder
	// ReadBuffers is the size of the UMA pool the reader reads into, registered once
	// with every io_uring ring. With Memory set, 0 takes the mode's default (elastic:
	// the budget floor; fixed: 64 MiB) and -1 uses package source's own pool; without
	// Memory, 0 uses package source's own pool.
	ReadBuffers int64
	// Memory is the memory runtime ([memory.Elastic] by default, [memory.Fixed] for
	// psiflow before it yielded to a co-tenant, "" for none: a plain budget of Budget bytes). With a
	// runtime, Budget is the largest budget (elastic) or the budget (fixed).
	Memory memory.Mode
	// Pressure gates the source and its reads on the cgroup's memory pressure
	// (with Memory set).
	Pressure bool
	// BelowFloor is what an elastic loader does when its cgroup leaves it less
	// than its floor ([FloorOf]): [memory.PauseBelowFloor] ("" too) pauses its
	// reads until the memory is back, [memory.StopBelowFloor] ends the run with a
	// [memory.BelowFloorError], [memory.RunAtFloor] runs on at the floor.
	BelowFloor memory.FloorPolicy
	// PauseTimeout ends a pause below the floor that lasted longer with a
	// [memory.BelowFloorError]: 0 is 10 minutes, pause.Forever never.
	PauseTimeout time.Duration
	// Process are the memory runtime's actions on the whole process (the OOM
	// preference, the locked program text, the Go memory limit): off by default
	// for a library, all on in the launcher ([memory.LauncherProcess]).
	Process memory.ProcessActions
	// Cache keeps samples between epochs in preemptible UMA memory (see
	// [CacheMode]); "" is CacheOff.
	Cache CacheMode
	// CacheMax bounds the cache in bytes; 0: half of the cgroup's memory limit.
	CacheMax int64
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
		Budget: 32 << 20, Epochs: 1, DropCache: true, Direct: true, Labels: true, Memory: memory.Elastic, Pressure: true}
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
	case c.StartEpoch < 0 || c.StartAt < 0:
		return fmt.Errorf("imagefolder: start epoch %d at offset %d: must not be negative", c.StartEpoch, c.StartAt)
	case c.Limit < 0:
		return fmt.Errorf("imagefolder: limit %d: must be 0 (all) or more", c.Limit)
	case c.ReadBuffers < 0 && (c.Memory == "" || c.ReadBuffers != -1):
		return fmt.Errorf("imagefolder: read buffers %d bytes: must be 0 (default), -1 (package source's pool, with Memory) or more", c.ReadBuffers)
	case c.Transform != nil && c.Cache != "" && c.Cache != CacheOff:
		return fmt.Errorf("imagefolder: cache %s with a custom transform: the cache holds the validation transform's samples (Resize, CenterCrop, uint8)", c.Cache)
	case c.CacheMax < 0:
		return fmt.Errorf("imagefolder: cache max %d bytes: must be 0 (default) or more", c.CacheMax)
	}
	if _, err := ParseCacheMode(string(c.Cache)); err != nil {
		return fmt.Errorf("imagefolder: %w", err)
	}
	if c.Memory != "" {
		if _, err := memory.ParseMode(string(c.Memory)); err != nil {
			return fmt.Errorf("imagefolder: %w", err)
		}
	}
	if c.BelowFloor != "" {
		if _, err := memory.ParseFloorPolicy(string(c.BelowFloor)); err != nil {
			return fmt.Errorf("imagefolder: %w", err)
		}
	}
	if c.Transform != nil {
		if err := c.Transform.Validate(); err != nil {
			return fmt.Errorf("imagefolder: %w", err)
		}
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
	// Registerer receives the memory runtime's metrics (psiflow_shed_action_*,
	// psiflow_elastic_*, psiflow_uma_*, psiflow_pressure_*), or without a runtime
	// the psiflow_uma_* metrics of the read-buffer UMA.
	Registerer prometheus.Registerer
	// Runtime, when set, is called with the memory runtime once it is built (to
	// report its pressure levels or shed actions after Run).
	Runtime func(*memory.Runtime)
	// Consume receives every batch; the graph releases the batch when it returns.
	Consume func(ctx context.Context, b *tensor.Batch) error
	// Info receives one line for each choice made at start (reader, decoder, buffers).
	Info func(string)
	// OnPause, when set, is told of every pause below the floor, resume and pause
	// timeout of the memory runtime (after Info has its line).
	OnPause func(pause.Event)
	// Progress, when not nil, is called about every Interval from another goroutine
	// that ends before Run returns.
	Progress func(progress.Snapshot)
	Interval time.Duration
	// Plan, when not nil, is told each epoch's number and this rank's share of
	// it (how many samples it delivers from where) before the epoch starts; an
	// error ends the run.
	Plan func(epoch int, share source.Share) error
	// OnEpoch, when not nil, is called after each epoch (numbered from 0) with
	// what it delivered, before the next one starts.
	OnEpoch func(n int, e progress.Epoch)
	// OnCache, when not nil, receives the sample cache once it is made (with
	// Config.Cache on), for example to register its Shed as a shed action.
	OnCache func(*umacache.Cache)
	// Reads and Decodes, when set, are told of every read and every decoded image
	// (internal/metrics implements both).
	Reads   source.ReadObserver
	Decodes decode.Observer
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
func Run(ctx context.Context, cfg Config, hooks Hooks) (sum progress.Summary, err error) {
	if err := cfg.Validate(); err != nil {
		return progress.Summary{}, err
	}
	files, err := source.Dir(cfg.Dir, Extensions...)
	if err != nil {
		return progress.Summary{}, err
	}
	labelOf := func(string) int64 { return -1 }
	if cfg.Labels {
		classes, err := source.ClassIndex(cfg.Dir)
		if err != nil {
			return progress.Summary{}, err
		}
		var outside []string
		if files, outside, err = classes.Members(files); err != nil {
			return progress.Summary{}, err
		}
		if n := classes.OutsideNotice(outside); n != "" {
			hooks.info("%s", n)
		}
		labelOf = classes.Label
	}
	dec, err := decode.NewDecoder(decode.Options{Backend: cfg.Backend, MaxPixels: cfg.MaxPixels})
	if err != nil {
		return progress.Summary{}, err
	}
	defer dec.Close()
	if st := source.IOStatus(); st.Reason != "" {
		hooks.info("reader: %s (%s)", st.Backend, st.Reason)
	} else {
		hooks.info("reader: %s, %s", st.Backend, st.SmallFiles())
	}
	if cfg.Direct {
		if files.Len() > 0 {
			if err := source.ProbeDirect(files.Path(0)); err != nil {
				hooks.info("reads: buffered, O_DIRECT refused here (%v)", err)
			} else {
				hooks.info("reads: O_DIRECT, past the page cache")
			}
		}
	}
	if why := dec.FallbackReason(); why != nil {
		hooks.info("JPEG decoder: Go standard library (%v)", why)
	} else {
		hooks.info("JPEG decoder: %s", dec.Backend())
	}
	var bufs source.BufferProvider
	var u *uma.UMA
	graphOpts := []flow.Option{flow.WithBudget(cfg.Budget), flow.WithQueueSize(cfg.Queue)}
	workers, err := memory.NewWorkers(cfg.Workers + memory.WorkerSlack)
	if err != nil {
		return progress.Summary{}, err
	}
	var rt *memory.Runtime
	if cfg.Memory != "" {
		if rt, err = newRuntime(cfg, files, hooks); err != nil {
			return progress.Summary{}, err
		}
		defer func() {
			// Close fails if any lease is still out: a leak would surface here.
			err = errors.Join(err, rt.Close())
		}()
		if hooks.Runtime != nil {
			hooks.Runtime(rt)
		}
		// The graph takes the runtime once: its budget, gate, monitor, headroom,
		// read buffers and epoch boundary come with it.
		graphOpts = []flow.Option{flow.WithRuntime(rt), flow.WithQueueSize(cfg.Queue)}
		workers, u = rt.Workers(), rt.UMA()
	} else if cfg.ReadBuffers > 0 {
		if u, err = uma.New(uma.Config{Registerer: hooks.Registerer, MemoryLimit: memory.SelfMemoryLimit}); err != nil {
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
		hooks.info("read buffers: a %s UMA pool registered with the rings", bytesize.Human(cfg.ReadBuffers))
	}
	cache, err := newSampleCache(cfg, u, dec, labelOf, hooks)
	if err != nil {
		return progress.Summary{}, err
	}
	// Closed before the UMA it may live in (deferred functions run last first).
	defer func() { err = errors.Join(err, cache.close()) }()
	if cache != nil && rt != nil {
		// At Critical the cache gives back its coldest eighth (it is rebuilt from
		// the files when the pressure is gone).
		rt.OnShed(memory.ActionSampleCache, func(context.Context) (int64, error) {
			return cache.c.Shed(max(cache.c.Stats().Bytes/8, 1<<20)), nil
		})
		// The cache follows the headroom: it may hold half of what the headroom
		// leaves the loader beyond its budget, never more than its own bound.
		bound := cache.c.MaxBytes()
		rt.OnHeadroom(func(rep pressure.HeadroomReport) {
			cache.c.SetLimit(min(bound, max(0, (rep.Allowance-rep.Budget)/2)))
		})
	}

	r := &runner{cfg: cfg, hooks: hooks, files: files, dec: dec, labelOf: labelOf, bufs: bufs,
		graphOpts: graphOpts, workers: workers, cache: cache, start: time.Now()}
	stop := progress.Report(hooks.Interval, hooks.Progress, r.snapshot)
	defer stop()
	defer func() { sum.Elapsed = time.Since(r.start) }() // sum is the named result: set after the return value
	err = r.epochs(ctx)
	return r.sum, err // no graph is running: nothing writes r.sum any more
}
