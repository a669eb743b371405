package pipelines

import (
	"errors"
	"math"
	"time"

	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
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
		func(b *tensor.Batch) (int64, int64) { return int64(len(b.Keys)), b.Size() }).
		WithCut(func(v any, keep int64) { v.(*tensor.Batch).Truncate(int(keep)) })
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
	for _, t := range []*ElemType{SampleType, ImageType, ImagesType, BatchType, TableType, TensorsType, StagedType, DeviceBatchType} {
		errs = append(errs, r.RegisterType(t))
	}
	shard := []Param{
		BoolParam("shuffle", false, "shuffle the shard order every epoch"),
		IntParam("seed", 1, 0, math.MaxInt64, "shuffle seed; the same seed, epoch, rank and world size give the same order"),
		IntParam("rank", -1, -1, 1<<20, "this loader's shard; -1: RANK from the environment (torchrun), else 0"),
		IntParam("world_size", 0, 0, 1<<20, "number of shards; 0: WORLD_SIZE from the environment, else 1"),
		BoolParam("drop_last", false, "cut each epoch's remainder so every rank reads the same count (else: padded by repeating the epoch's first entries, as DistributedSampler)"),
	}
	withShard := func(ps ...Param) []Param { return append(ps, shard...) }
	for _, k := range append([]Kind{
		{
			Name: "files", Role: SourceRole, Out: "sample",
			Doc: "files under a folder, searched recursively (ImageNet/ImageFolder layout), read by io_uring or pread",
			Params: withShard(
				StringParam("dir", "", "the folder").Require(),
				StringListParam("extensions", defaultExtensions, "file name endings to read"),
				IntParam("readers", 0, 0, 1024, "readers (one ring each); 0: package source's default"),
				BoolParam("drop_cache", false, "drop each file's page cache once read"),
				BoolParam("direct", false, "read with O_DIRECT, past the page cache (file systems that refuse it, such as tmpfs, are read buffered)"),
				BytesParam("read_buffers", 0, 0, 1<<40, "size of the memory runtime's read pool registered with the rings (reads beyond it go to a spill pool given back under pressure); 0: the runtime's default (elastic: the budget floor, at most 4 MiB; fixed: 64 MiB)"),
			),
			Build: buildFiles, Floor: floorFiles,
		},
		{
			Name: "tar", Role: SourceRole, Out: "sample",
			Doc: "WebDataset tar shards: members sharing a key form one sample, one field per extension",
			Params: withShard(
				StringListParam("paths", nil, "shard files or glob patterns (shard-*.tar)").Require(),
				IntParam("shuffle_buffer", 0, 0, 1<<20, "also shuffle samples through a buffer of this many; 0: off"),
				BoolParam("skip_bad", false, "skip truncated shards and unreadable members instead of failing"),
			),
			Build: buildTar, Floor: floorPerSample(256 << 10),
		},
		{
			Name: "tables", Role: SourceRole, Out: "table",
			Doc: "Parquet or Arrow IPC files read as record batches (one per row group or IPC batch)",
			Params: withShard(
				StringListParam("paths", nil, "table files or glob patterns").Require(),
				EnumParam("format", "auto", []string{"auto", "parquet", "arrow"}, "file format; auto: by extension (.parquet, else Arrow IPC)"),
				StringListParam("columns", []string{}, "top-level columns to read; empty: all"),
			),
			Build: buildTables, Floor: floorFixed(4 << 20),
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
			Build: buildGenerate, Floor: floorGenerate,
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
				IntParam("max_pixels", decode.DefaultMaxPixels, -1, 1<<62, "refuse images larger than this many pixels (width × height) from their header, before decoding (Pillow's limit); -1: none"),
				EnumParam("on_error", "stop", []string{"stop", "skip"}, "a bad image: stop (end the run with an error naming it) or skip (name it, count it, go on)"),
				IntParam("max_skips", 0, 0, 1<<62, "on_error: skip: stop after this many skipped images in an epoch; 0: no limit"),
				FloatParam("max_skip_rate", 0, 0, 1, "on_error: skip: stop when more than this fraction of an epoch's images is skipped; 0: no limit"),
				IntParam("seed", 1, 0, math.MaxInt64, "seed of the random crop and flip"),
			},
			Build: buildDecode, Floor: floorDecode, Check: checkDecode,
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
	}, append(deviceKinds(), sinkKinds()...)...) {
		errs = append(errs, r.Register(k))
	}
	return errors.Join(errs...)
}

// shardOptions are a source's sharding and shuffle parameters. world_size 0
// and rank -1 follow the launcher's environment, read by source.EnvSharding (the
// one place RANK and WORLD_SIZE are read), never by the source's zero value.
func shardOptions(cfg *Config, epoch int) (source.Options, error) {
	o := source.Options{Epoch: epoch, Shuffle: cfg.Bool("shuffle"), Seed: uint64(cfg.Int("seed")), DropLast: cfg.Bool("drop_last")}
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
