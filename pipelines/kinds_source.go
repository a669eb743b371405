package pipelines

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/stage"
)

// listFiles is the files source's dataset, listed once per run (its floor and
// every epoch's graph read the same list): ImageFolder's class members when a
// stage labels by folder.
func listFiles(b *Build, cfg *Config) (*source.Files, error) {
	v, err := b.Keep(func() (any, func() error, error) {
		dir := cfg.String("dir")
		files, err := source.Dir(dir, cfg.Strings("extensions")...)
		if err != nil {
			return nil, nil, err
		}
		if folderLabelled(b.Pipeline) {
			classes, err := sharedClasses(b, dir)
			if err != nil {
				return nil, nil, err
			}
			var outside []string
			if files, outside, err = classes.Members(files); err != nil {
				return nil, nil, err
			}
			if n := classes.OutsideNotice(outside); n != "" {
				b.Info("%s", n)
			}
		}
		if cfg.Bool("direct") && files.Len() > 0 {
			if err := source.ProbeDirect(files.Path(0)); err != nil {
				b.Info("reads: buffered, O_DIRECT refused here (%v)", err)
			} else {
				b.Info("reads: O_DIRECT, past the page cache")
			}
		}
		return files, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*source.Files), nil
}

func floorFiles(b *Build, cfg *Config, f *Floor) error {
	files, err := listFiles(b, cfg)
	if err != nil {
		return err
	}
	n, err := filesFloor(files, f.Batch)
	if err != nil {
		return err
	}
	f.Budget += n
	return nil
}

// floorPerSample is a source's floor when it knows no sizes before reading: a
// batch of samples of about per bytes, at least 1 MiB.
func floorPerSample(per int64) func(*Build, *Config, *Floor) error {
	return func(_ *Build, _ *Config, f *Floor) error {
		f.Budget += max(int64(f.Batch)*per, minBudgetFloor)
		return nil
	}
}

// floorFixed is a source's floor of n bytes (one record batch of a table).
func floorFixed(n int64) func(*Build, *Config, *Floor) error {
	return func(_ *Build, _ *Config, f *Floor) error {
		f.Budget += n
		return nil
	}
}

func buildFiles(b *Build, cfg *Config, _ Stream) (Stream, error) {
	files, err := listFiles(b, cfg)
	if err != nil {
		return Stream{}, err
	}
	if io := source.IOStatus(); io.Reason != "" {
		b.Info("reader %s (%s)", io.Backend, io.Reason)
	} else {
		b.Info("reader %s, %s", io.Backend, io.SmallFiles())
	}
	o, err := shardOptions(cfg, b.Epoch)
	if err != nil {
		return Stream{}, err
	}
	// The reads land in the memory runtime's read pools (flowsrc takes them from
	// the graph's runtime).
	o.Workers = int(cfg.Int("readers"))
	o.Reader = source.ReaderOptions{DropCache: cfg.Bool("drop_cache"), Direct: cfg.Bool("direct"), Observer: b.Reads()}
	o.SkipPolicy = readSkipPolicy(b)
	if repass := b.run.repass; repass != nil {
		// The cached samples the kernel reclaimed: read as they are listed.
		o.Epoch, o.Rank, o.WorldSize, o.Shuffle, o.DropLast = 0, 0, 1, false, false
		return Wrap(SampleType, flowsrc.Files(b.Graph, b.Name, source.NewFiles(repass), o))
	}
	o.Resume = resume(b, o)
	sh, err := source.NewShare(files.Len(), o, b.Resume())
	if err != nil {
		return Stream{}, err
	}
	b.Plan(sh)
	if c := b.run.cache; c != nil {
		return c.source(b, files, o)
	}
	return Wrap(SampleType, flowsrc.Files(b.Graph, b.Name, files, o))
}

// readSkipPolicy is the skip policy of a files source's read errors (a file gone,
// cut short or unreadable since the list was taken): that of the pipeline's
// decode stage (on_error, max_skips, max_skip_rate), so that on_error: skip
// covers a bad file whether its read or its decode fails; each skip is named
// through Hooks.Skipped and counted. Without a decode stage (or with one whose
// parameters are wrong: its own build says so) reads stop.
func readSkipPolicy(b *Build) stage.SkipPolicy {
	for _, c := range b.Pipeline.Stages {
		if c.Kind.Name != "decode" {
			continue
		}
		_, skip, err := decodeParams(c.Config)
		if err != nil || skip.OnError != stage.Skip {
			return stage.SkipPolicy{}
		}
		skip.Log = b.SkippedSample
		return skip
	}
	return stage.SkipPolicy{}
}

// folderLabelled reports whether a stage of p labels samples by their
// ImageFolder class (label: folder): the files source then reads only the
// files inside a class folder.
func folderLabelled(p *Pipeline) bool {
	for _, c := range p.Stages {
		if _, ok := c.Kind.Param("label"); ok && c.Config.String("label") == "folder" {
			return true
		}
	}
	return false
}

// sharedClasses is the class index of dir, read once per run for every kind
// that needs it.
func sharedClasses(b *Build, dir string) (*source.Classes, error) {
	v, err := b.Shared("classes "+dir, func() (any, func() error, error) {
		c, err := source.ClassIndex(dir)
		return c, nil, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*source.Classes), nil
}

// resume is the position a source of this epoch resumes at (nil: the start).
func resume(b *Build, o source.Options) *source.Position {
	if start := b.Resume(); start > 0 {
		return &source.Position{Epoch: o.Epoch, Seed: o.Seed, Shuffle: o.Shuffle, Consumed: start}
	}
	return nil
}

func buildTar(b *Build, cfg *Config, _ Stream) (Stream, error) {
	v, err := b.Keep(func() (any, func() error, error) {
		ds, err := source.TarGlob(cfg.Strings("paths")...)
		return ds, nil, err
	})
	if err != nil {
		return Stream{}, err
	}
	o, err := shardOptions(cfg, b.Epoch)
	if err != nil {
		return Stream{}, err
	}
	o.ShuffleBuffer, o.Skip, o.OnSkip = int(cfg.Int("shuffle_buffer")), cfg.Bool("skip_bad"), b.Skipped
	o.Resume = resume(b, o)
	return Wrap(SampleType, flowsrc.Tar(b.Graph, b.Name, v.(*source.TarShards), o))
}

func buildTables(b *Build, cfg *Config, _ Stream) (Stream, error) {
	v, err := b.Keep(func() (any, func() error, error) {
		files, err := source.Glob(cfg.Strings("paths")...)
		if err != nil {
			return nil, nil, err
		}
		paths := files.Paths()
		format := cfg.String("format")
		if format == "auto" {
			format = "arrow"
			if len(paths) > 0 && strings.EqualFold(filepath.Ext(paths[0]), ".parquet") {
				format = "parquet"
			}
		}
		if format == "parquet" {
			return source.NewParquet(paths, cfg.Strings("columns")...), nil, nil
		}
		return source.NewArrowIPC(paths, cfg.Strings("columns")...), nil, nil
	})
	if err != nil {
		return Stream{}, err
	}
	o, err := shardOptions(cfg, b.Epoch)
	if err != nil {
		return Stream{}, err
	}
	o.Resume = resume(b, o)
	return Wrap(TableType, flowsrc.Tables(b.Graph, b.Name, v.(*source.Tables), o))
}

// generated is the generate source's distinct images, encoded once per run.
func generated(b *Build, cfg *Config) ([][]byte, error) {
	im := synth.Image{Width: int(cfg.Int("width")), Height: int(cfg.Int("height")), Quality: int(cfg.Int("quality")), Noise: 72}
	seed := uint64(cfg.Int("seed"))
	v, err := b.Keep(func() (any, func() error, error) {
		imgs := make([][]byte, cfg.Int("distinct"))
		for i := range imgs {
			data, err := synth.JPEG(im, seed, i)
			if err != nil {
				return nil, nil, err
			}
			imgs[i] = data
		}
		return imgs, nil, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([][]byte), nil
}

func floorGenerate(b *Build, cfg *Config, f *Floor) error {
	imgs, err := generated(b, cfg)
	if err != nil {
		return err
	}
	var largest, total int64
	for _, d := range imgs {
		largest, total = max(largest, int64(len(d))), total+int64(len(d))
	}
	f.Budget += max(int64(f.Batch)*total/int64(len(imgs)), 2*largest, minBudgetFloor)
	return nil
}

func buildGenerate(b *Build, cfg *Config, _ Stream) (Stream, error) {
	imgs, err := generated(b, cfg)
	if err != nil {
		return Stream{}, err
	}
	items := cfg.Int("items")
	epoch := b.Epoch
	return Wrap(SampleType, flow.Source(b.Graph, b.Name, func(ctx context.Context, out *flow.Emitter[*source.Sample]) error {
		for i := range items {
			data := imgs[int(i)%len(imgs)]
			if err := out.Reserve(ctx, int64(len(data))); err != nil {
				return err
			}
			s := &source.Sample{Key: fmt.Sprintf("gen/%d/%08d", epoch, i), Index: int64(i), Epoch: int64(epoch), Fields: []source.Field{{Name: "jpg", Data: data}}}
			if err := out.Emit(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}))
}
