package pipelines

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/tensor/tensorarrow"
)

func buildDecode(b *Build, cfg *Config, in Stream) (Stream, error) {
	samples, err := Unwrap[*source.Sample](in)
	if err != nil {
		return Stream{}, err
	}
	backend := map[string]decode.Backend{"auto": decode.BackendAuto, "turbojpeg": decode.BackendTurbo, "std": decode.BackendStd}[cfg.String("backend")]
	tr, skip, err := decodeParams(cfg)
	if err != nil {
		return Stream{}, err
	}
	skip.Log = b.SkippedSample
	skip.MaxSkipsOption = optionName(b.run.hooks, b.Name, "max_skips")
	v, err := b.Keep(func() (any, func() error, error) {
		dec, err := decode.NewDecoder(decode.Options{Backend: backend, MaxPixels: cfg.Int("max_pixels"),
			MaxPixelsOption: optionName(b.run.hooks, b.Name, "max_pixels")})
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
		if lib, why := dec.CropDecoding(); why != nil {
			b.Info("crop-aware decoding off, random resized crops decode whole JPEGs (%v)", why)
		} else {
			b.Info("crop-aware decoding: %s", lib)
		}
	}
	labelOf := func(*source.Sample) int64 { return -1 }
	keyLabel := func(string) int64 { return -1 } // a cached sample's label, from its key
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
		keyLabel = classes.Label
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
	cache := b.run.cache
	// Each image's decoded bytes are reserved from the graph's budget before it
	// is decoded.
	// Normalised float32 images that only collate reads stay uint8 until
	// collate writes the batch (tensor.Sample.Normalize): a quarter of the
	// bytes between here and the batch, one pass fewer.
	collateNormalizes := feedsOnly(b.Pipeline, b.Name, "batch", "collate") && (cache == nil || cache.mode != "decoded")
	st, err := decode.NewStage(b.Name, dec, decode.StageConfig{Workers: workers, Ordered: cfg.Bool("ordered"), Transform: tr,
		Budget: b.Graph.Budget(), Skip: skip, Observer: b.Decodes(), CollateNormalizes: collateNormalizes},
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
			cache.putEncoded(s, e.Data)
			return e
		})
	if err != nil {
		return Stream{}, err
	}
	// The memory runtime narrows decoding under pressure: a sample enters
	// decoding only while one of its decode slots is free.
	held := flow.Via(samples, memory.Narrow[*source.Sample](b.Name+"-narrow", b.Runtime.Workers()), flow.QueueSize(1))
	decoded := flow.Via(held, st)
	if cache != nil {
		decoded = cache.afterDecode(b, decoded, keyLabel)
	}
	return Wrap(ImageType, decoded)
}

// feedsOnly reports whether node's stream goes to one reader of kind
// kinds[0], whose stream goes to one reader of kinds[1], and so on.
func feedsOnly(p *Pipeline, node string, kinds ...string) bool {
	for _, kind := range kinds {
		var readers []*Component
		for _, c := range p.Nodes() {
			if slices.Contains(c.Inputs, node) {
				readers = append(readers, c)
			}
		}
		if len(readers) != 1 || readers[0].Kind.Name != kind || len(readers[0].Inputs) != 1 {
			return false
		}
		node = readers[0].Name
	}
	return true
}

// decodeParams are a decode node's transform and skip policy, checked
// together (also when the file is validated: checkDecode).
func decodeParams(cfg *Config) (decode.Transform, stage.SkipPolicy, error) {
	if cfg.Int("max_pixels") == 0 {
		return decode.Transform{}, stage.SkipPolicy{}, errors.New("max_pixels 0: must be positive, or -1 for no limit")
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
			return tr, stage.SkipPolicy{}, err
		}
		std, err := floatList("std", cfg.String("std"))
		if err != nil {
			return tr, stage.SkipPolicy{}, err
		}
		if tr.Normalize, err = decode.NewNormalizer(mean, std); err != nil {
			return tr, stage.SkipPolicy{}, err
		}
	}
	if err := tr.Validate(); err != nil {
		return tr, stage.SkipPolicy{}, err
	}
	onError, err := stage.ParseOnError(cfg.String("on_error"))
	if err != nil {
		return tr, stage.SkipPolicy{}, err
	}
	skip := stage.SkipPolicy{OnError: onError, MaxSkips: cfg.Int("max_skips"), MaxRate: cfg.Float("max_skip_rate")}
	if (skip.MaxSkips != 0 || skip.MaxRate != 0) && onError != stage.Skip {
		return tr, skip, errors.New("max_skips and max_skip_rate need on_error: skip")
	}
	return tr, skip, skip.Validate()
}

func checkDecode(cfg *Config) error {
	_, _, err := decodeParams(cfg)
	return err
}

func floorDecode(_ *Build, cfg *Config, f *Floor) error {
	f.Other += decodeFloor(cfg, f.Batch)
	return nil
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
	// into the memory of a sink that lends it (the torch sink's shared
	// slots), else into the stage's own buffers
	return Wrap(BatchType, flow.Via(groups, tensor.CollateInto(b.Name, b.run.destination), flow.QueueSize(1)))
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
