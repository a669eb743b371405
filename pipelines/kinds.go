package pipelines

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/tensor/tensorarrow"
)

// The built-in element types.
var (
	SampleType = NewType("sample", "*source.Sample: one raw training example, named fields of bytes (a file, or a tar sample's members)",
		func(s *source.Sample) (int64, int64) { return 1, s.Len() })
	ImageType = NewType("image", "*tensor.Sample: one decoded, transformed image tensor with its key and label",
		func(s *tensor.Sample) (int64, int64) { return 1, s.Size() })
	ImagesType = NewType("images", "[]*tensor.Sample: a group of images from batch, not yet collated",
		func(ss []*tensor.Sample) (int64, int64) {
			var n int64
			for _, s := range ss {
				n += s.Size()
			}
			return int64(len(ss)), n
		})
	BatchType = NewType("batch", "*tensor.Batch: one contiguous tensor [n, ...] with the samples' keys and labels",
		func(b *tensor.Batch) (int64, int64) { return int64(len(b.Keys)), b.Size() })
	TableType = NewType("table", "*source.Batch: one Arrow record batch (a Parquet row group or an IPC record batch)",
		func(b *source.Batch) (int64, int64) { return b.Record.NumRows(), b.Len() })
	TensorsType = NewType("tensors", "*pipelines.Tensors: named tensors of one record batch's columns, one row per sample",
		func(t *Tensors) (int64, int64) { return int64(t.Rows), t.Size() })
)

// Tensors are the columns of one record batch as tensors, one row per sample:
// numeric columns become float32 [rows], list columns float32 [rows, n] and
// binary columns uint8 [rows, n].
type Tensors struct {
	Rows    int
	Names   []string
	Tensors []tensor.Tensor
}

// Size is the tensors' bytes.
func (t *Tensors) Size() int64 {
	var n int64
	for i := range t.Tensors {
		n += t.Tensors[i].NBytes()
	}
	return n
}

var defaultExtensions = []string{".jpg", ".jpeg", ".JPEG", ".png"}

// RegisterBuiltins adds the built-in element types and kinds to r (what [Default]
// holds), for isolated registries that add kinds of their own.
func RegisterBuiltins(r *Registry) error {
	var errs []error
	for _, t := range []*ElemType{SampleType, ImageType, ImagesType, BatchType, TableType, TensorsType} {
		errs = append(errs, r.RegisterType(t))
	}
	shard := []Param{
		BoolParam("shuffle", false, "shuffle the shard order every epoch"),
		IntParam("seed", 1, 0, math.MaxInt64, "shuffle seed; the same seed, epoch, rank and world size give the same order"),
		IntParam("rank", -1, -1, 1<<20, "this loader's shard; -1: RANK from the environment (torchrun), else 0"),
		IntParam("world_size", 0, 0, 1<<20, "number of shards; 0: WORLD_SIZE from the environment, else 1"),
	}
	withShard := func(ps ...Param) []Param { return append(ps, shard...) }
	for _, k := range []Kind{
		{
			Name: "files", Role: SourceRole, Out: "sample",
			Doc: "files under a folder, searched recursively (ImageNet/ImageFolder layout), read by io_uring or pread",
			Params: withShard(
				StringParam("dir", "", "the folder").Require(),
				StringListParam("extensions", defaultExtensions, "file name endings to read"),
				IntParam("readers", 0, 0, 1024, "readers (one ring each); 0: package source's default"),
				BoolParam("drop_cache", false, "drop each file's page cache once read"),
				BoolParam("direct", false, "read with O_DIRECT, past the page cache (file systems that refuse it, such as tmpfs, are read buffered)"),
				BytesParam("read_buffers", 0, 0, 1<<40, "size of the memory runtime's read pool registered with the rings (reads beyond it go to a spill pool given back under pressure); 0: the runtime's default (the budget floor elastic, 64 MiB fixed)"),
			),
			Build: buildFiles,
		},
		{
			Name: "tar", Role: SourceRole, Out: "sample",
			Doc: "WebDataset tar shards: members sharing a key form one sample, one field per extension",
			Params: withShard(
				StringListParam("paths", nil, "shard files or glob patterns (shard-*.tar)").Require(),
				IntParam("shuffle_buffer", 0, 0, 1<<20, "also shuffle samples through a buffer of this many; 0: off"),
				BoolParam("skip_bad", false, "skip truncated shards and unreadable members instead of failing"),
			),
			Build: buildTar,
		},
		{
			Name: "tables", Role: SourceRole, Out: "table",
			Doc: "Parquet or Arrow IPC files read as record batches (one per row group or IPC batch)",
			Params: withShard(
				StringListParam("paths", nil, "table files or glob patterns").Require(),
				EnumParam("format", "auto", []string{"auto", "parquet", "arrow"}, "file format; auto: by extension (.parquet, else Arrow IPC)"),
				StringListParam("columns", []string{}, "top-level columns to read; empty: all"),
			),
			Build: buildTables,
		},
		{
			Name: "generate", Role: SourceRole, Out: "sample",
			Doc: "synthetic JPEG samples made in memory (no data needed): a few distinct images encoded once and cycled",
			Params: []Param{
				IntParam("items", 1000, 1, 1<<40, "samples per epoch"),
				IntParam("width", 320, 8, 8192, "image width in pixels"),
				IntParam("height", 240, 8, 8192, "image height in pixels"),
				IntParam("quality", 85, 1, 100, "JPEG quality"),
				IntParam("distinct", 16, 1, 4096, "distinct images encoded at start and cycled"),
				IntParam("seed", 1, 0, math.MaxInt64, "image seed"),
			},
			Build: buildGenerate,
		},
		{
			Name: "decode", Role: StageRole, In: "sample", Out: "image",
			Doc: "JPEG (libjpeg-turbo, or the Go standard library) and PNG decoding, then Resize, crop, flip and tensor conversion",
			Params: []Param{
				IntParam("workers", 0, 0, 1024, "samples decoded at once; 0: GOMAXPROCS"),
				BoolParam("ordered", false, "keep the input order (else completion order)"),
				StringParam("field", "", "the field holding the image (jpg, png...); empty: the first field"),
				EnumParam("label", "none", []string{"none", "folder", "field"}, "the label: none (-1), folder (ImageFolder class index of a files source, whose files outside a class folder are then skipped with one notice, as torchvision does) or field (label_field's text)"),
				StringParam("label_field", "cls", "the field holding the label as decimal text, with label: field"),
				IntParam("resize", 0, 0, 16384, "shorter side after resizing (torchvision Resize(n)); 0: keep"),
				IntParam("center_crop", 0, 0, 16384, "central square crop; 0: none"),
				IntParam("random_crop", 0, 0, 16384, "random square crop; 0: none (not with center_crop)"),
				IntParam("random_resized_crop", 0, 0, 16384, "torchvision RandomResizedCrop(n): a box of random area and ratio resized to n×n; 0: none (not with resize or the crops)"),
				FloatParam("scale_min", 0.08, 1e-6, 1, "random_resized_crop: smallest box area, a fraction of the image's"),
				FloatParam("scale_max", 1, 1e-6, 1, "random_resized_crop: largest box area, a fraction of the image's"),
				FloatParam("ratio_min", 3.0/4, 1e-3, 1e3, "random_resized_crop: smallest aspect ratio (width/height), drawn log-uniformly"),
				FloatParam("ratio_max", 4.0/3, 1e-3, 1e3, "random_resized_crop: largest aspect ratio (width/height)"),
				FloatParam("flip", 0, 0, 1, "probability of a horizontal flip"),
				BoolParam("exact", false, "decode every JPEG at full size: the same bytes as Pillow + torchvision (else at 1/2, 1/4 or 1/8 where the next size is at most half the source; docs/DECODE.md)"),
				EnumParam("layout", "chw", []string{"chw", "hwc"}, "tensor layout"),
				EnumParam("normalize", "none", []string{"none", "imagenet", "custom"}, "none: uint8 output; imagenet or custom (mean, std): float32 (v/255-mean)/std"),
				StringParam("mean", "0.485,0.456,0.406", "normalize: custom: per-channel means, comma-separated"),
				StringParam("std", "0.229,0.224,0.225", "normalize: custom: per-channel standard deviations, comma-separated"),
				EnumParam("backend", "auto", []string{"auto", "turbojpeg", "std"}, "JPEG decoder: auto (libjpeg-turbo when present), turbojpeg (required) or std"),
				IntParam("seed", 1, 0, math.MaxInt64, "seed of the random crop and flip"),
			},
			Build: buildDecode,
		},
		{
			Name: "batch", Role: StageRole, In: "image", Out: "images",
			Doc: "groups images into lists of size (the last may be shorter)",
			Params: []Param{
				IntParam("size", 64, 1, 1<<20, "images per batch"),
				DurationParam("max_wait", 0, 0, time.Hour, "emit a short batch after waiting this long; 0: never"),
			},
			Build: buildBatch,
		},
		{
			Name: "collate", Role: StageRole, In: "images", Out: "batch",
			Doc:   "copies a list of same-shaped images into one contiguous tensor and releases them",
			Build: buildCollate,
		},
		{
			Name: "to_tensors", Role: StageRole, In: "table", Out: "tensors",
			Doc: "converts columns to tensors: numbers to float32 [rows], lists to float32 [rows, n], binary to uint8 [rows, n]",
			Params: []Param{
				StringListParam("columns", []string{}, "the columns to convert, in order; empty: all"),
			},
			Build: buildToTensors,
		},
		{
			Name: "discard", Role: SinkRole, In: AnyType,
			Doc:   "counts and drops every element (benchmarks, tests, dry runs)",
			Build: buildDiscard,
		},
	} {
		errs = append(errs, r.Register(k))
	}
	return errors.Join(errs...)
}

// shardOptions are a source's sharding and shuffle parameters. world_size 0
// and rank -1 follow the launcher's environment, read by source.EnvSharding (the
// one place RANK and WORLD_SIZE are read), never by the source's zero value.
func shardOptions(cfg *Config, epoch int) (source.Options, error) {
	o := source.Options{Epoch: epoch, Shuffle: cfg.Bool("shuffle"), Seed: uint64(cfg.Int("seed"))}
	ws, rank := cfg.Int("world_size"), cfg.Int("rank")
	if ws == 0 || rank < 0 {
		sh, err := source.EnvSharding()
		if err != nil {
			return o, err
		}
		if ws == 0 {
			ws = int64(sh.WorldSize)
		}
		if rank < 0 {
			rank = int64(sh.Rank)
		}
	}
	o.WorldSize, o.Rank = int(ws), int(rank)
	return o, nil
}

func buildFiles(b *Build, cfg *Config, _ Stream) (Stream, error) {
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
		return files, nil, nil
	})
	if err != nil {
		return Stream{}, err
	}
	files := v.(*source.Files)
	if io := source.IOStatus(); io.Reason != "" {
		b.Info("reader %s (%s)", io.Backend, io.Reason)
	} else {
		b.Info("reader %s", io.Backend)
	}
	o, err := shardOptions(cfg, b.Epoch)
	if err != nil {
		return Stream{}, err
	}
	// The reads land in the memory runtime's read pools (flowsrc takes them from
	// the graph's runtime).
	o.Workers = int(cfg.Int("readers"))
	o.Reader = source.ReaderOptions{DropCache: cfg.Bool("drop_cache"), Direct: cfg.Bool("direct")}
	return Wrap(SampleType, flowsrc.Files(b.Graph, b.Name, files, o))
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
	return Wrap(TableType, flowsrc.Tables(b.Graph, b.Name, v.(*source.Tables), o))
}

func buildGenerate(b *Build, cfg *Config, _ Stream) (Stream, error) {
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
		return Stream{}, err
	}
	imgs := v.([][]byte)
	items := cfg.Int("items")
	epoch := b.Epoch
	return Wrap(SampleType, flow.Source(b.Graph, b.Name, func(ctx context.Context, out *flow.Emitter[*source.Sample]) error {
		for i := range items {
			data := imgs[int(i)%len(imgs)]
			if err := out.Reserve(ctx, int64(len(data))); err != nil {
				return err
			}
			s := &source.Sample{Key: fmt.Sprintf("gen/%d/%08d", epoch, i), Index: int64(i), Fields: []source.Field{{Name: "jpg", Data: data}}}
			if err := out.Emit(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}))
}

func buildDecode(b *Build, cfg *Config, in Stream) (Stream, error) {
	samples, err := Unwrap[*source.Sample](in)
	if err != nil {
		return Stream{}, err
	}
	backend := map[string]decode.Backend{"auto": decode.BackendAuto, "turbojpeg": decode.BackendTurbo, "std": decode.BackendStd}[cfg.String("backend")]
	v, err := b.Keep(func() (any, func() error, error) {
		dec, err := decode.NewDecoder(decode.Options{Backend: backend})
		if err != nil {
			return nil, nil, err
		}
		return dec, dec.Close, nil
	})
	if err != nil {
		return Stream{}, err
	}
	dec := v.(*decode.Decoder)
	if why := dec.FallbackReason(); why != nil {
		b.Info("JPEG decoder: Go standard library (%v)", why)
	} else {
		b.Info("JPEG decoder: %s", dec.Backend())
	}
	tr := decode.Transform{
		Resize: int(cfg.Int("resize")), CenterCrop: int(cfg.Int("center_crop")), RandomCrop: int(cfg.Int("random_crop")),
		RandomResizedCrop: decode.ResizedCrop{Size: int(cfg.Int("random_resized_crop")),
			Scale: [2]float64{cfg.Float("scale_min"), cfg.Float("scale_max")},
			Ratio: [2]float64{cfg.Float("ratio_min"), cfg.Float("ratio_max")}},
		FlipProb: cfg.Float("flip"), Layout: tensor.CHW, Seed: uint64(cfg.Int("seed")), Exact: cfg.Bool("exact"),
	}
	if cfg.String("layout") == "hwc" {
		tr.Layout = tensor.HWC
	}
	switch cfg.String("normalize") {
	case "imagenet":
		tr.Normalize = decode.ImageNet()
	case "custom":
		mean, err := floatList("mean", cfg.String("mean"))
		if err != nil {
			return Stream{}, err
		}
		std, err := floatList("std", cfg.String("std"))
		if err != nil {
			return Stream{}, err
		}
		if tr.Normalize, err = decode.NewNormalizer(mean, std); err != nil {
			return Stream{}, err
		}
	}
	if err := tr.Validate(); err != nil {
		return Stream{}, err
	}
	labelOf := func(*source.Sample) int64 { return -1 }
	switch cfg.String("label") {
	case "folder":
		src := b.Pipeline.Source
		if src.Kind.Name != "files" {
			return Stream{}, fmt.Errorf("label: folder needs a files source, not %s", src.Kind.Name)
		}
		dir := src.Config.String("dir")
		classes, err := sharedClasses(b, dir)
		if err != nil {
			return Stream{}, err
		}
		if len(classes.Names()) == 0 {
			b.Info("label: folder: %s has no class folders, every sample's label is -1", dir)
		}
		labelOf = func(s *source.Sample) int64 { return classes.Label(s.Key) }
	case "field":
		name := cfg.String("label_field")
		labelOf = func(s *source.Sample) int64 {
			n, err := strconv.ParseInt(strings.TrimSpace(string(s.Field(name))), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	field := cfg.String("field")
	epoch := b.Epoch
	workers := int(cfg.Int("workers"))
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Each image's decoded bytes are reserved from the graph's budget before it
	// is decoded.
	st, err := decode.NewStage(b.Name, dec, decode.StageConfig{Workers: workers, Ordered: cfg.Bool("ordered"), Transform: tr, Budget: b.Graph.Budget()},
		func(h *memory.Held[*source.Sample]) decode.Encoded {
			s := h.V
			e := decode.Encoded{Key: s.Key, Label: labelOf(s), Index: s.Index, Epoch: int64(epoch)}
			switch {
			case field != "":
				if e.Data = s.Field(field); e.Data == nil {
					e.Err = s.MissingField(field)
				}
			case len(s.Fields) > 0:
				e.Data = s.Fields[0].Data
			}
			return e
		})
	if err != nil {
		return Stream{}, err
	}
	// The memory runtime narrows decoding under pressure: a sample enters
	// decoding only while one of its decode slots is free.
	held := flow.Via(samples, memory.Narrow[*source.Sample](b.Name+"-narrow", b.Runtime.Workers()), flow.QueueSize(1))
	return Wrap(ImageType, flow.Via(held, st))
}

// floatList parses a comma-separated list of numbers, the value of param.
func floatList(param, v string) ([]float32, error) {
	var out []float32
	for _, f := range strings.Split(v, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a comma-separated list of numbers: %w", param, v, err)
		}
		out = append(out, float32(x))
	}
	return out, nil
}

func buildBatch(b *Build, cfg *Config, in Stream) (Stream, error) {
	imgs, err := Unwrap[*tensor.Sample](in)
	if err != nil {
		return Stream{}, err
	}
	return Wrap(ImagesType, flow.Via(imgs, stage.Batch[*tensor.Sample](b.Name, int(cfg.Int("size")), cfg.Duration("max_wait")), flow.QueueSize(1)))
}

func buildCollate(b *Build, _ *Config, in Stream) (Stream, error) {
	groups, err := Unwrap[[]*tensor.Sample](in)
	if err != nil {
		return Stream{}, err
	}
	return Wrap(BatchType, flow.Via(groups, tensor.Collate(b.Name), flow.QueueSize(1)))
}

func buildToTensors(b *Build, cfg *Config, in Stream) (Stream, error) {
	tables, err := Unwrap[*source.Batch](in)
	if err != nil {
		return Stream{}, err
	}
	want := cfg.Strings("columns")
	// The tensors are copies: the graph releases each record batch once converted.
	return Wrap(TensorsType, flow.OrderedMap(tables, b.Name, 1, func(_ context.Context, tb *source.Batch) (*Tensors, error) {
		return columnsToTensors(tb, want)
	}))
}

// columnsToTensors converts the named columns of tb (all when names is empty).
func columnsToTensors(tb *source.Batch, names []string) (*Tensors, error) {
	ts, names, err := tensorarrow.Record(tb.Record, names)
	if err != nil {
		return nil, fmt.Errorf("%s batch %d: %w", tb.File, tb.Index, err)
	}
	return &Tensors{Rows: int(tb.Record.NumRows()), Names: names, Tensors: ts}, nil
}

func buildDiscard(b *Build, _ *Config, in Stream) (Stream, error) {
	t := in.Type
	in.Sink(b.Name, func(_ context.Context, v any) error {
		return b.Deliver(t.Count(v))
	})
	return Stream{}, nil
}
