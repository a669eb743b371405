package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
)

func init() {
	register(command{name: "serve", summary: "serve batches to a Python training loop (python/psiflow) over a Unix socket and shared memory", run: runServe})
}

// serveConfig is what `psiflow serve` was asked for.
type serveConfig struct {
	socket        string
	slots         int
	keys          bool
	acceptTimeout time.Duration
	folder        imagefolder.Config
	plan          bool
	rrc           int        // -random-resized-crop
	scale, ratio  [2]float64 // its ranges
	flip          float64
	normalize     string
	rank          int // -1: from the environment
	worldSize     int // 0: from the environment
	budget        string
	// synthetic: batches of known bytes instead of a folder (tests of the Python module).
	synthetic int
	shape     []int
	failAfter int
}

func parseServe(args []string) (serveConfig, error) {
	c := serveConfig{folder: imagefolder.DefaultConfig("")}
	c.folder.Process = memory.LauncherProcess()
	c.folder.ReadBuffers = 0 // package source's own buffers, as psiflow-imagefolder
	fs := flag.NewFlagSet("psiflow serve", flag.ContinueOnError)
	fs.StringVar(&c.socket, "socket", "", "Unix socket to listen on (required); python/psiflow's Client connects to it")
	fs.IntVar(&c.slots, "slots", 4, "batches outstanding in Python at once (the shared-memory ring's length)")
	fs.BoolVar(&c.keys, "keys", false, "send each sample's file path with the batch")
	fs.DurationVar(&c.acceptTimeout, "accept-timeout", time.Minute, "give up when no consumer connects within this time")
	fs.BoolVar(&c.folder.Pressure, "pressure", true, "gate the source and its reads on this cgroup's memory pressure")
	fs.StringVar(&c.folder.Dir, "data", "", "image folder (ImageFolder layout) to read → decode → Resize → CenterCrop → batch")
	fs.IntVar(&c.folder.BatchSize, "batch", 64, "samples per batch")
	fs.IntVar(&c.folder.Workers, "workers", runtime.GOMAXPROCS(0), "decode workers")
	fs.IntVar(&c.folder.Resize, "resize", 256, "Resize: shorter side")
	fs.IntVar(&c.folder.Crop, "crop", 224, "CenterCrop size")
	fs.IntVar(&c.folder.Epochs, "epochs", 1, "passes over the folder")
	fs.Int64Var(&c.folder.Limit, "limit", 0, "stop after this many samples (0: all)")
	fs.BoolVar(&c.folder.Ordered, "ordered", false, "keep file order through decoding")
	fs.BoolVar(&c.folder.Shuffle, "shuffle", false, "shuffle every epoch: a permutation of the whole folder per (seed, epoch), then sharded by rank")
	fs.Uint64Var(&c.folder.Seed, "seed", 0, "seed of the shuffle")
	fs.BoolVar(&c.folder.DropLast, "drop-last", false, "cut each epoch's remainder so every rank reads the same count (else: padded by repeating the epoch's first files)")
	fs.IntVar(&c.folder.StartEpoch, "epoch", 0, "number of the first epoch (it selects the shuffle)")
	fs.Int64Var(&c.folder.StartAt, "start", 0, "resume the first epoch at this global offset (entries consumed by all ranks together)")
	fs.IntVar(&c.rrc, "random-resized-crop", 0, "the training transform: torchvision RandomResizedCrop(n) instead of -resize and -crop; 0: none")
	fs.Float64Var(&c.scale[0], "scale-min", 0.08, "-random-resized-crop: smallest box area, a fraction of the image's")
	fs.Float64Var(&c.scale[1], "scale-max", 1, "-random-resized-crop: largest box area")
	fs.Float64Var(&c.ratio[0], "ratio-min", 3.0/4, "-random-resized-crop: smallest aspect ratio (width/height)")
	fs.Float64Var(&c.ratio[1], "ratio-max", 4.0/3, "-random-resized-crop: largest aspect ratio")
	fs.Float64Var(&c.flip, "flip", 0, "probability of a horizontal flip (RandomHorizontalFlip: 0.5)")
	fs.StringVar(&c.normalize, "normalize", "none", "none: uint8 output; imagenet: float32 (v/255-mean)/std with ImageNet's mean and std")
	fs.BoolVar(&c.plan, "plan", false, "send each epoch's plan (samples, rank's share, start) before its batches, as a \"plan\" message (python/psiflow's DataLoader asks for it)")
	fs.IntVar(&c.rank, "rank", -1, "this process's rank; -1: RANK from the environment, else 0")
	fs.IntVar(&c.worldSize, "world-size", 0, "number of ranks; 0: WORLD_SIZE from the environment, else 1")
	fs.StringVar(&c.budget, "budget", "32M", "graph byte budget (bytes in flight from read to decode), K/M/G suffixes")
	fs.IntVar(&c.synthetic, "synthetic", 0, "serve this many synthetic batches of known bytes instead of a folder (for tests)")
	shape := fs.String("shape", "4,3,8,8", "with -synthetic: batch shape (samples first), uint8")
	fs.IntVar(&c.failAfter, "fail-after", 0, "with -synthetic: fail after this many batches (tests the error path)")
	floor := addFloorFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	var err error
	if c.folder.BelowFloor, c.folder.PauseTimeout, err = floor.apply(fs); err != nil {
		return c, err
	}
	if c.socket == "" {
		return c, fmt.Errorf("%w: -socket is required", errUsage)
	}
	if (c.folder.Dir == "") == (c.synthetic == 0) {
		return c, fmt.Errorf("%w: give exactly one of -data DIR and -synthetic N", errUsage)
	}
	if c.synthetic < 0 || c.failAfter < 0 {
		return c, fmt.Errorf("%w: -synthetic and -fail-after must not be negative", errUsage)
	}
	for _, f := range strings.Split(*shape, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 1 {
			return c, fmt.Errorf("%w: -shape %q: want positive integers separated by commas", errUsage, *shape)
		}
		c.shape = append(c.shape, d)
	}
	if c.folder.Budget, err = flagval.ParseSize(c.budget); err != nil || c.folder.Budget <= 0 {
		return c, fmt.Errorf("%w: -budget %q: want a positive size such as 32M", errUsage, c.budget)
	}
	if c.folder.Dir != "" {
		tr, err := c.transform()
		if err != nil {
			return c, fmt.Errorf("%w: %v", errUsage, err)
		}
		c.folder.Transform = tr
		if err := c.folder.Validate(); err != nil {
			return c, fmt.Errorf("%w: %v", errUsage, err)
		}
		// RANK and WORLD_SIZE are read here, before anyone connects, unless
		// -rank and -world-size say it.
		c.folder.Rank, c.folder.WorldSize = c.rank, c.worldSize
		if c.rank < 0 || c.worldSize == 0 {
			sh, err := source.EnvSharding()
			if err != nil {
				return c, fmt.Errorf("%w: %v", errUsage, err)
			}
			if c.rank < 0 {
				c.folder.Rank = sh.Rank
			}
			if c.worldSize == 0 {
				c.folder.WorldSize = sh.WorldSize
			}
		}
		if c.folder.WorldSize < 1 || c.folder.Rank < 0 || c.folder.Rank >= c.folder.WorldSize {
			return c, fmt.Errorf("%w: rank %d of world size %d is out of range", errUsage, c.folder.Rank, c.folder.WorldSize)
		}
	}
	return c, nil
}

func runServe(ctx context.Context, stdout io.Writer, args []string) error {
	c, err := parseServe(args)
	if err != nil {
		return err
	}
	t, err := sink.NewTorch(sink.TorchConfig{Socket: c.socket, Slots: c.slots, Keys: c.keys})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "psiflow serve: listening on %s (%d slots)\n", c.socket, c.slots)
	actx, cancel := context.WithTimeout(ctx, c.acceptTimeout)
	err = t.Accept(actx)
	cancel()
	if err == nil {
		if c.synthetic > 0 {
			err = serveSynthetic(ctx, c, t)
		} else {
			err = serveFolder(ctx, c, t, stdout)
		}
	}
	sent, released := t.Counts()
	if errors.Is(err, sink.ErrConsumerClosed) {
		fmt.Fprintf(stdout, "psiflow serve: the consumer stopped after %d batches\n", sent)
		return t.Close(nil)
	}
	if cerr := t.Close(err); err == nil {
		err = cerr
	}
	if err == nil {
		fmt.Fprintf(stdout, "psiflow serve: %d batches sent, %d released\n", sent, released)
	}
	return err
}

func serveFolder(ctx context.Context, c serveConfig, t *sink.Torch, stdout io.Writer) error {
	// The memory runtime (elastic by default) gates the source when
	// c.folder.Pressure is set: no gate of its own here.
	var rt *memory.Runtime
	hooks := imagefolder.Hooks{
		Consume: t.Consume,
		Info:    func(s string) { fmt.Fprintln(stdout, "  "+s) },
		Runtime: func(r *memory.Runtime) { rt = r },
	}
	if c.plan {
		// Each epoch's plan goes to the consumer before its batches
		// (python/psiflow's DataLoader takes len() and its state from it).
		hooks.Plan = func(epoch int, sh source.Share) error {
			return t.Announce(ctx, "plan", servePlan{Epoch: epoch, Samples: sh.Samples, Rank: sh.Rank, WorldSize: sh.WorldSize,
				Start: sh.Start, Count: sh.Count, DropLast: sh.DropLast, Shuffle: c.folder.Shuffle, Seed: c.folder.Seed, BatchSize: c.folder.BatchSize})
		}
	}
	sum, err := imagefolder.Run(ctx, c.folder, hooks)
	if sec := sum.Elapsed.Seconds(); sec > 0 {
		fmt.Fprintf(stdout, "psiflow serve: %d samples in %d batches, %.1f s, %.0f samples/s\n", sum.Items, sum.Batches, sec, float64(sum.Items)/sec)
	}
	if rt != nil {
		if n, d := rt.PauseStats(); n > 0 {
			fmt.Fprintf(stdout, "psiflow serve: %s\n", memory.PauseSummary(n, d))
		}
	}
	return err
}

// transform is the training transform the flags ask for, nil for the
// validation transform (-resize, -crop, uint8).
func (c serveConfig) transform() (*decode.Transform, error) {
	if c.rrc == 0 && c.flip == 0 && c.normalize == "none" {
		return nil, nil
	}
	tr := decode.Transform{Resize: c.folder.Resize, CenterCrop: c.folder.Crop, FlipProb: c.flip, Layout: tensor.CHW, Seed: c.folder.Seed}
	if c.rrc > 0 {
		tr.Resize, tr.CenterCrop = 0, 0
		tr.RandomResizedCrop = decode.ResizedCrop{Size: c.rrc, Scale: c.scale, Ratio: c.ratio}
	}
	switch c.normalize {
	case "none":
	case "imagenet":
		tr.Normalize = decode.ImageNet()
	default:
		return nil, fmt.Errorf("-normalize %q: want none or imagenet", c.normalize)
	}
	if err := tr.Validate(); err != nil {
		return nil, err
	}
	return &tr, nil
}

// servePlan is the "plan" message sent before each epoch's batches: this
// rank's share of the epoch (source.Share) and how it is batched.
type servePlan struct {
	Epoch     int    `json:"epoch"`
	Samples   int    `json:"samples"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	Start     int64  `json:"start"`
	Count     int64  `json:"count"`
	DropLast  bool   `json:"drop_last"`
	Shuffle   bool   `json:"shuffle"`
	Seed      uint64 `json:"seed"`
	BatchSize int    `json:"batch_size"`
}

// serveSynthetic sends c.synthetic batches whose byte j of sample i (counted
// across batches) is (i*31 + j*7 + j/251) % 253, label i % 3, key "s%06d" —
// what python/tests check.
func serveSynthetic(ctx context.Context, c serveConfig, t *sink.Torch) error {
	n, per := c.shape[0], 1
	for _, d := range c.shape[1:] {
		per *= d
	}
	for k := range c.synthetic {
		if c.failAfter > 0 && k == c.failAfter {
			return fmt.Errorf("synthetic failure after %d batches (-fail-after)", k)
		}
		b := &tensor.Batch{Tensor: tensor.Tensor{DType: tensor.Uint8, Shape: c.shape, U8: make([]byte, n*per)}}
		for i := range n {
			idx := k*n + i
			for j := range per {
				b.Tensor.U8[i*per+j] = byte((idx*31 + j*7 + j/251) % 253)
			}
			b.Keys = append(b.Keys, fmt.Sprintf("s%06d", idx))
			b.Labels = append(b.Labels, int64(idx%3))
		}
		if err := t.Consume(ctx, b); err != nil {
			return err
		}
	}
	return nil
}
