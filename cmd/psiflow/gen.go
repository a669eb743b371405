package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/source/synth"
)

func init() {
	register(command{
		name:    "gen",
		summary: "write synthetic datasets (jpeg files, tar shards, parquet, arrow) for demos and benchmarks",
		run:     runGen,
	})
}

const genUsage = `Usage: psiflow gen <jpeg|tar|parquet|arrow> -out DIR [flags]

  jpeg     N noisy JPEG files (ImageNet-like by default: 500x375, q85, about 110 KB each;
           -bytes picks the noise for another size)
  tar      WebDataset tar shards: samples of jpg + cls + json fields
  parquet  Parquet files: columns id, label, score, payload; one row group per batch
  arrow    Arrow IPC files with the same columns; one record batch per batch

Output is deterministic for a given -seed.

Flags:
`

// runGen implements "psiflow gen".
func runGen(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("gen", stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), genUsage)
		fs.PrintDefaults()
	}
	out := fs.String("out", "", "output directory (created if missing; required)")
	seed := fs.Uint64("seed", 1, "random seed")
	n := flagval.Int(fs, "n", 1000, 1, 1<<24, "jpeg: number of files")
	width := flagval.Int(fs, "width", 500, 1, 65500, "jpeg, tar: image width in pixels (JPEG's limit: 65500)")
	height := flagval.Int(fs, "height", 375, 1, 65500, "jpeg, tar: image height in pixels (JPEG's limit: 65500)")
	quality := flagval.Int(fs, "quality", 85, 1, 100, "jpeg, tar: JPEG quality (1-100)")
	noise := flagval.Int(fs, "noise", 72, 0, 255, "jpeg, tar: per-pixel noise amplitude, 0-255 (more noise, bigger files; 0 for none)")
	size := flagval.Size(fs, "bytes", 0, 0, 1<<30, "jpeg, tar: aim for about this many bytes per image (e.g. 110KiB) by choosing -noise (0: use -noise)")
	shards := flagval.Int(fs, "shards", 4, 1, 1<<20, "tar: number of shards")
	samples := flagval.Int(fs, "samples", 256, 1, 1<<24, "tar: samples per shard")
	files := flagval.Int(fs, "files", 2, 1, 1<<20, "parquet, arrow: number of files")
	batches := flagval.Int(fs, "batches", 8, 1, 1<<20, "parquet, arrow: row groups / record batches per file")
	rows := flagval.Int(fs, "rows", 1024, 1, 1<<24, "parquet, arrow: rows per batch")
	payload := flagval.Size(fs, "payload", 1024, 0, 1<<26, "parquet, arrow: bytes of the payload column per row (e.g. 4KiB)")
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fs.Usage()
		if len(args) == 0 {
			return fmt.Errorf("%w: missing kind (jpeg, tar, parquet or arrow)", errUsage)
		}
		return nil
	}
	kind := args[0]
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *out == "" {
		return fmt.Errorf("%w: -out is required", errUsage)
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"n", *n}, {"width", *width}, {"height", *height}, {"shards", *shards}, {"samples", *samples}, {"files", *files}, {"batches", *batches}, {"rows", *rows}} {
		if c.v <= 0 {
			return fmt.Errorf("%w: -%s %d must be positive", errUsage, c.name, c.v)
		}
	}
	if *quality < 1 || *quality > 100 || *payload < 0 || *noise > 255 || *size < 0 {
		return fmt.Errorf("%w: -quality must be 1-100, -noise at most 255, -payload and -bytes ≥ 0", errUsage)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	im := synth.Image{Width: *width, Height: *height, Quality: *quality, Noise: *noise}
	if *noise <= 0 {
		im.Noise = -1
	}
	if *size > 0 && (kind == "jpeg" || kind == "tar") {
		nz, err := synth.NoiseForSize(im, int(*size), *seed)
		if err != nil {
			return err
		}
		im.Noise = max(nz, 1)
		fmt.Fprintf(stdout, "noise %d for about %d bytes per image\n", nz, *size)
	}
	tab := synth.Table{Files: *files, Batches: *batches, Rows: *rows, PayloadBytes: int(*payload)}
	start := time.Now()
	var paths []string
	var err error
	switch kind {
	case "jpeg":
		paths, err = synth.JPEGFilesContext(ctx, *out, *n, im, *seed)
	case "tar":
		paths, err = synth.TarShardsContext(ctx, *out, synth.Shards{Shards: *shards, Samples: *samples, Image: im}, *seed)
	case "parquet":
		paths, err = synth.ParquetFilesContext(ctx, *out, tab, *seed)
	case "arrow":
		paths, err = synth.ArrowFilesContext(ctx, *out, tab, *seed)
	default:
		return fmt.Errorf("%w: unknown kind %q (want jpeg, tar, parquet or arrow)", errUsage, kind)
	}
	if err != nil {
		return err
	}
	var total int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		total += st.Size()
	}
	avg := int64(0)
	if len(paths) > 0 {
		avg = total / int64(len(paths))
	}
	fmt.Fprintf(stdout, "wrote %d %s files, %d bytes (%d bytes each on average) to %s in %.1fs\n",
		len(paths), kind, total, avg, *out, time.Since(start).Seconds())
	return nil
}
