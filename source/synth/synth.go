package synth

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"
)

// Image describes the synthetic JPEGs: size, quality and noise. The defaults
// (500×375, quality 85, noise 72) give about 110 KB (107 KiB) per image, like ImageNet.
type Image struct {
	Width, Height int
	Quality       int
	// Noise is the amplitude of per-pixel noise added to a smooth gradient;
	// more noise means larger files.
	Noise int
}

func (im Image) withDefaults() Image {
	if im.Width <= 0 {
		im.Width = 500
	}
	if im.Height <= 0 {
		im.Height = 375
	}
	if im.Quality <= 0 {
		im.Quality = 85
	}
	if im.Noise < 0 {
		im.Noise = 0
	} else if im.Noise == 0 {
		im.Noise = 72
	}
	return im
}

// JPEG encodes image number i for seed.
func JPEG(im Image, seed uint64, i int) ([]byte, error) {
	im = im.withDefaults()
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	img := image.NewRGBA(image.Rect(0, 0, im.Width, im.Height))
	r0, g0, b0 := rng.IntN(256), rng.IntN(256), rng.IntN(256)
	for y := 0; y < im.Height; y++ {
		for x := 0; x < im.Width; x++ {
			n := func(base int) uint8 {
				v := base + (x+y)/8 + rng.IntN(2*im.Noise+1) - im.Noise
				return uint8(min(max(v, 0), 255))
			}
			img.SetRGBA(x, y, color.RGBA{n(r0), n(g0), n(b0), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: im.Quality}); err != nil {
		return nil, fmt.Errorf("synth: encode image %d: %w", i, err)
	}
	return buf.Bytes(), nil
}

// JPEGFiles writes n images (on GOMAXPROCS goroutines) to dir as 00000000.jpg, 00000001.jpg, … and returns their paths.
func JPEGFiles(dir string, n int, im Image, seed uint64) ([]string, error) {
	return JPEGFilesContext(context.Background(), dir, n, im, seed)
}

// JPEGFilesContext is [JPEGFiles] that stops when ctx ends: no image is started
// after, the ones being written are finished, and ctx's error is returned.
func JPEGFilesContext(ctx context.Context, dir string, n int, im Image, seed uint64) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	paths := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		paths[i] = filepath.Join(dir, fmt.Sprintf("%08d.jpg", i))
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			b, err := JPEG(im, seed, i)
			if err != nil {
				return err
			}
			if err := os.WriteFile(paths[i], b, 0o644); err != nil {
				return fmt.Errorf("synth: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return paths, nil
}

// Shards describes WebDataset tar shards: Samples samples per shard, each
// with a "jpg" field (a synthetic JPEG), a "cls" field (the class number as
// text) and a "json" field.
type Shards struct {
	Shards, Samples int
	Image           Image
}

// TarShards writes s.Shards shards to dir as shard-000000.tar, … and returns their paths.
func TarShards(dir string, s Shards, seed uint64) ([]string, error) {
	return TarShardsContext(context.Background(), dir, s, seed)
}

// Stopped is the error of a writer stopped by its context: what it removed (the
// file it was writing, which would be partial) and what it kept. It unwraps to
// the context's error (errors.Is(err, context.Canceled)).
type Stopped struct {
	// Err is the context's error.
	Err error
	// Removed is the partial file removed, "" when none was being written.
	Removed string
	// Done is how many of the file's units (samples of a shard, batches of a
	// table) were written before the stop; Of is how many it was to hold.
	Done, Of int
	// Unit names them: "samples", "batches".
	Unit string
	// Kept are the whole files written before it, left in place.
	Kept []string
}

// Error says what was removed and kept: "removed the partial shard
// DIR/shard-000001.tar (12 of 50 samples written); kept 1 whole file".
func (e *Stopped) Error() string {
	kept := fmt.Sprintf("kept %d whole files", len(e.Kept))
	if len(e.Kept) == 1 {
		kept = "kept 1 whole file"
	}
	if e.Removed == "" {
		return "stopped before any file was started; " + kept
	}
	return fmt.Sprintf("removed the partial file %s (%d of %d %s written); %s", e.Removed, e.Done, e.Of, e.Unit, kept)
}

// Unwrap returns the context's error.
func (e *Stopped) Unwrap() error { return e.Err }

// TarShardsContext is [TarShards] that stops when ctx ends, between two samples:
// the shard being written is removed and a [*Stopped] returned (wrapping ctx's error).
func TarShardsContext(ctx context.Context, dir string, s Shards, seed uint64) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	var paths []string
	for sh := range s.Shards {
		p := filepath.Join(dir, fmt.Sprintf("shard-%06d.tar", sh))
		if err := writeShard(ctx, p, sh, s, seed); err != nil {
			var st *Stopped
			if errors.As(err, &st) {
				st.Kept = paths
			}
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func writeShard(ctx context.Context, p string, sh int, s Shards, seed uint64) error {
	if err := ctx.Err(); err != nil {
		return &Stopped{Err: err, Unit: "samples"} // nothing started
	}
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	tw := tar.NewWriter(f)
	for i := range s.Samples {
		if err := ctx.Err(); err != nil {
			f.Close()
			os.Remove(p)
			return &Stopped{Err: err, Removed: p, Done: i, Of: s.Samples, Unit: "samples"}
		}
		idx := sh*s.Samples + i
		img, err := JPEG(s.Image, seed, idx)
		if err != nil {
			f.Close()
			return err
		}
		key := fmt.Sprintf("s%08d", idx)
		fields := []struct {
			ext  string
			data []byte
		}{
			{"jpg", img},
			{"cls", []byte(fmt.Sprint(idx % 1000))},
			{"json", []byte(fmt.Sprintf(`{"index":%d,"shard":%d}`, idx, sh))},
		}
		for _, fl := range fields {
			h := &tar.Header{Name: key + "." + fl.ext, Mode: 0o644, Size: int64(len(fl.data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
			if err := tw.WriteHeader(h); err != nil {
				f.Close()
				return fmt.Errorf("synth: %s: %w", p, err)
			}
			if _, err := tw.Write(fl.data); err != nil {
				f.Close()
				return fmt.Errorf("synth: %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return fmt.Errorf("synth: %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("synth: %s: %w", p, err)
	}
	return nil
}

// Table describes synthetic tables: Files files of Batches batches (Parquet
// row groups or IPC record batches) of Rows rows. Columns: id (int64),
// label (int32), score (float64), payload (binary of PayloadBytes bytes).
type Table struct {
	Files, Batches, Rows int
	PayloadBytes         int
}

var tableSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "label", Type: arrow.PrimitiveTypes.Int32},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64},
	{Name: "payload", Type: arrow.BinaryTypes.Binary},
}, nil)

// Batch builds batch b of file f; the caller releases it.
func Batch(t Table, seed uint64, f, b int) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	rng := rand.New(rand.NewPCG(seed, uint64(f)<<32|uint64(b)))
	bld := array.NewRecordBuilder(mem, tableSchema)
	defer bld.Release()
	base := int64((f*t.Batches + b) * t.Rows)
	payload := make([]byte, t.PayloadBytes)
	for r := range t.Rows {
		bld.Field(0).(*array.Int64Builder).Append(base + int64(r))
		bld.Field(1).(*array.Int32Builder).Append(int32(rng.IntN(1000)))
		bld.Field(2).(*array.Float64Builder).Append(rng.Float64())
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		bld.Field(3).(*array.BinaryBuilder).Append(payload)
	}
	return bld.NewRecordBatch()
}

// ParquetFiles writes t.Files Parquet files (one row group per batch) to dir.
func ParquetFiles(dir string, t Table, seed uint64) ([]string, error) {
	return ParquetFilesContext(context.Background(), dir, t, seed)
}

// ParquetFilesContext is [ParquetFiles] that stops when ctx ends, between two
// batches: the file being written is removed and a [*Stopped] returned.
func ParquetFilesContext(ctx context.Context, dir string, t Table, seed uint64) ([]string, error) {
	return writeTables(ctx, dir, "parquet", t, seed, func(f *os.File, fi int) error {
		props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(max(t.Rows, 1))))
		w, err := pqarrow.NewFileWriter(tableSchema, f, props, pqarrow.DefaultWriterProps())
		if err != nil {
			return err
		}
		for b := range t.Batches {
			if err := ctx.Err(); err != nil {
				w.Close()
				return &Stopped{Err: err, Done: b, Of: t.Batches, Unit: "batches"}
			}
			rec := Batch(t, seed, fi, b)
			err := w.Write(rec) // Write starts a new row group per call when rows ≤ max length
			rec.Release()
			if err != nil {
				w.Close()
				return err
			}
		}
		return w.Close()
	})
}

// ArrowFiles writes t.Files Arrow IPC files (file format) to dir.
func ArrowFiles(dir string, t Table, seed uint64) ([]string, error) {
	return ArrowFilesContext(context.Background(), dir, t, seed)
}

// ArrowFilesContext is [ArrowFiles] that stops when ctx ends, between two batches:
// the file being written is removed and a [*Stopped] returned.
func ArrowFilesContext(ctx context.Context, dir string, t Table, seed uint64) ([]string, error) {
	return writeTables(ctx, dir, "arrow", t, seed, func(f *os.File, fi int) error {
		w, err := ipc.NewFileWriter(f, ipc.WithSchema(tableSchema))
		if err != nil {
			return err
		}
		for b := range t.Batches {
			if err := ctx.Err(); err != nil {
				w.Close()
				return &Stopped{Err: err, Done: b, Of: t.Batches, Unit: "batches"}
			}
			rec := Batch(t, seed, fi, b)
			err := w.Write(rec)
			rec.Release()
			if err != nil {
				w.Close()
				return err
			}
		}
		return w.Close()
	})
}

func writeTables(ctx context.Context, dir, ext string, t Table, seed uint64, write func(*os.File, int) error) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	var paths []string
	for fi := range t.Files {
		if err := ctx.Err(); err != nil {
			return nil, &Stopped{Err: err, Unit: "batches", Kept: paths} // nothing started
		}
		p := filepath.Join(dir, fmt.Sprintf("part-%06d.%s", fi, ext))
		f, err := os.Create(p)
		if err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
		if err := write(f, fi); err != nil {
			f.Close()
			if ctx.Err() != nil {
				os.Remove(p) // stopped: no partial file
				st := &Stopped{Err: ctx.Err(), Of: t.Batches, Unit: "batches"}
				errors.As(err, &st) // the batches written, when the writer saw the stop
				st.Removed, st.Kept = p, paths
				return nil, st
			}
			return nil, fmt.Errorf("synth: %s: %w", p, err)
		}
		if ext == "arrow" {
			if err := f.Close(); err != nil {
				return nil, fmt.Errorf("synth: %s: %w", p, err)
			}
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// NoiseForSize returns the noise amplitude at which images like im (its
// size and quality) encode to about target bytes, by bisection over a few
// sample images. Sizes grow with noise; targets outside the reachable range
// return the nearest end (0 or 255).
func NoiseForSize(im Image, target int, seed uint64) (int, error) {
	avg := func(noise int) (int, error) {
		im := im
		im.Noise = noise
		if noise == 0 {
			im.Noise = -1
		}
		total := 0
		for i := range 3 {
			b, err := JPEG(im, seed, i)
			if err != nil {
				return 0, err
			}
			total += len(b)
		}
		return total / 3, nil
	}
	lo, hi := 0, 255
	for lo < hi {
		mid := (lo + hi) / 2
		n, err := avg(mid)
		if err != nil {
			return 0, err
		}
		if n < target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}
