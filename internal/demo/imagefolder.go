package demo

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/source/umabuf"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/uma"
)

// FolderConfig sizes the image-folder pipeline: read (io_uring, or pread
// where io_uring is unavailable) → decode JPEG/PNG (TurboJPEG where
// available) → Resize → CenterCrop → batch → collate → consume.
type FolderConfig struct {
	Dir        string // folder of .jpg/.jpeg/.png files, searched recursively
	Workers    int    // decode workers
	BatchSize  int
	Resize     int   // shorter side after Resize
	Crop       int   // CenterCrop size
	Budget     int64 // bytes in flight from read to decode
	Epochs     int
	DropCache  bool // drop each file's page cache once read
	ReaderInfo func(string)
	Graph      GraphHooks
	// ReadBuffers is the size of the UMA pool the reader reads into,
	// registered once with every io_uring ring; 0 uses package source's own
	// buffer pool instead of UMA.
	ReadBuffers int64
}

// DefaultFolderConfig is what "make run" uses on the generated folder.
func DefaultFolderConfig(dir string) FolderConfig {
	return FolderConfig{Dir: dir, Workers: runtime.GOMAXPROCS(0), BatchSize: 64, Resize: 256, Crop: 224, Budget: 32 << 20, Epochs: 1, DropCache: true, ReadBuffers: 64 << 20}
}

// RunFolder runs the image-folder pipeline once per epoch; progress works as in [Run].
func RunFolder(ctx context.Context, cfg FolderConfig, interval time.Duration, progress func(Snapshot)) (_ Summary, err error) {
	if cfg.Workers < 1 || cfg.BatchSize < 1 || cfg.Epochs < 1 || cfg.Budget <= 0 {
		return Summary{}, fmt.Errorf("workers %d, batch %d, epochs %d, budget %d: all must be positive", cfg.Workers, cfg.BatchSize, cfg.Epochs, cfg.Budget)
	}
	files, err := source.Dir(cfg.Dir, ".jpg", ".jpeg", ".JPEG", ".png")
	if err != nil {
		return Summary{}, err
	}
	dec, err := decode.NewDecoder(decode.Options{})
	if err != nil {
		return Summary{}, err
	}
	defer dec.Close()
	if cfg.ReaderInfo != nil {
		if st := source.IOStatus(); st.Reason != "" {
			cfg.ReaderInfo(fmt.Sprintf("reader: %s (%s)", st.Backend, st.Reason))
		} else {
			cfg.ReaderInfo(fmt.Sprintf("reader: %s", st.Backend))
		}
		if why := dec.FallbackReason(); why != nil {
			cfg.ReaderInfo(fmt.Sprintf("JPEG decoder: Go standard library (%v)", why))
		} else {
			cfg.ReaderInfo("JPEG decoder: libjpeg-turbo")
		}
	}
	var bufs source.BufferProvider
	if cfg.ReadBuffers > 0 {
		u, err := uma.New(uma.Config{})
		if err != nil {
			return Summary{}, err
		}
		pool, err := u.NewPool("read-buffers", cfg.ReadBuffers, uma.ArenaOptions{Registered: true})
		if err != nil {
			u.Close()
			return Summary{}, err
		}
		if bufs, err = umabuf.New(pool); err != nil {
			pool.Close()
			u.Close()
			return Summary{}, err
		}
		defer func() {
			// Close fails if any lease is still out: a leak would surface here.
			err = errors.Join(err, pool.Close(), u.Close())
		}()
		if cfg.ReaderInfo != nil {
			cfg.ReaderInfo(fmt.Sprintf("read buffers: a %d MiB UMA pool registered with the rings", cfg.ReadBuffers>>20))
		}
	}
	var sum Summary
	var mu sync.Mutex
	start := time.Now()
	var current *flow.Graph
	stop := reportProgress(interval, progress, func() Snapshot {
		mu.Lock()
		snap := Snapshot{Items: sum.Items, Bytes: sum.Bytes, Elapsed: time.Since(start)}
		g := current
		mu.Unlock()
		if g != nil {
			snap.BudgetInUse, snap.BudgetLimit = g.Budget().InUse(), g.Budget().Limit()
			snap.Bottleneck, snap.BottleneckBusyPct = bottleneck(g.Stats(), snap.Elapsed)
		}
		return snap
	})
	defer stop()

	for epoch := range cfg.Epochs {
		st, err := decode.NewStage("decode", dec, decode.StageConfig{
			Workers:   cfg.Workers,
			Transform: decode.Transform{Resize: cfg.Resize, CenterCrop: cfg.Crop, Layout: decode.CHW},
		}, func(s *source.Sample) decode.Encoded {
			e := decode.Encoded{Key: s.Key}
			if len(s.Fields) > 0 {
				e.Data = s.Fields[0].Data
			}
			mu.Lock()
			sum.Bytes += int64(len(e.Data))
			mu.Unlock()
			return e
		})
		if err != nil {
			return sum, err
		}
		g := flow.New("imagefolder", append([]flow.Option{flow.WithBudget(cfg.Budget), flow.WithQueueSize(4)}, cfg.Graph.Options...)...)
		src := flowsrc.Files(g, "read", files, source.Options{Epoch: epoch, Buffers: bufs, Reader: source.ReaderOptions{DropCache: cfg.DropCache}})
		batches := flow.Via(flow.Via(src, st), stage.Batch[*decode.Sample]("batch", cfg.BatchSize, 0), flow.QueueSize(1))
		collated := flow.Via(batches, decode.Collate("collate"), flow.QueueSize(1))
		flow.Sink(collated, "consume", func(_ context.Context, b *decode.Batch) error {
			mu.Lock()
			sum.Items += int64(len(b.Keys))
			sum.Batches++
			mu.Unlock()
			return nil
		})
		mu.Lock()
		current = g
		mu.Unlock()
		err = cfg.Graph.run(ctx, g)
		mu.Lock()
		sum.Stages = g.Stats()
		sum.Peak = max(sum.Peak, g.Budget().MaxInUse())
		mu.Unlock()
		if err != nil {
			sum.Elapsed = time.Since(start)
			return sum, err
		}
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}
