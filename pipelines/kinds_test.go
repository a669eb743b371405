package pipelines

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/tensor"
)

// genFile is a synthetic pipeline of items 64×48 JPEGs decoded to 16×16,
// batched by batch, ending in sinkYAML.
func genFile(items, batch int, sinkYAML string, extra string) string {
	return fmt.Sprintf(`source: {kind: generate, config: {items: %d, width: 64, height: 48, distinct: 4}}
stages:
  - {kind: decode, config: {resize: 20, center_crop: 16, workers: 2}}
  - {kind: batch, config: {size: %d}}
  - collate
sink: %s
resources: {budget: 16MiB, pressure: off}
%s`, items, batch, sinkYAML, extra)
}

func runFile(t *testing.T, yaml string, hooks Hooks, sets ...string) (int64, int64, error) {
	t.Helper()
	p, err := Parse("t.yaml", []byte(yaml), Options{Set: sets})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), p, hooks)
	return sum.Items, sum.Batches, err
}

// limit is exact: the batch that reaches it is cut, as a sampler's len says.
func TestLimitIsExact(t *testing.T) {
	for _, tc := range []struct {
		limit, items, batch int
		wantBatches         int64
	}{
		{1, 100, 32, 1},
		{50, 100, 16, 4},
		{48, 100, 16, 3},
		{200, 100, 16, 7}, // more than there is: all of it
	} {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			var seen []int
			items, batches, err := runFile(t, genFile(tc.items, tc.batch, "discard", fmt.Sprintf("limit: %d\n", tc.limit)),
				Hooks{Batches: func(_ context.Context, b *tensor.Batch) error {
					if b.Tensor.Shape[0] != b.Len() || len(b.Labels) != b.Len() || len(b.Tensor.U8) != b.Len()*3*16*16 {
						return fmt.Errorf("a cut batch is not whole: shape %v, %d keys, %d labels, %d bytes", b.Tensor.Shape, b.Len(), len(b.Labels), len(b.Tensor.U8))
					}
					seen = append(seen, b.Len())
					return nil
				}})
			want := int64(min(tc.limit, tc.items))
			if err != nil || items != want || batches != tc.wantBatches {
				t.Fatalf("limit %d: %d samples in %d batches (%v), %v; want %d in %d", tc.limit, items, batches, seen, err, want, tc.wantBatches)
			}
		})
	}
}

// The summary counts what the sink accepted: a consumer that fails on the
// second batch leaves one batch delivered, and its error ends the run.
func TestSummaryCountsWhatTheSinkAccepted(t *testing.T) {
	bad := errors.New("the trainer failed")
	n := 0
	items, batches, err := runFile(t, genFile(40, 8, "discard", ""), Hooks{Batches: func(context.Context, *tensor.Batch) error {
		if n++; n == 2 {
			return bad
		}
		return nil
	}})
	if !errors.Is(err, bad) || items != 8 || batches != 1 {
		t.Fatalf("%d samples in %d batches, %v; want 8 in 1 and the consumer's error", items, batches, err)
	}
	// A sink that refuses its destination delivers nothing.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "old.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	items, _, err = runFile(t, genFile(10, 4, fmt.Sprintf("{kind: parquet, config: {dir: %q}}", dir), ""), Hooks{})
	if err == nil || items != 0 {
		t.Fatalf("parquet into a non-empty folder: %d samples, %v; want 0 and an error", items, err)
	}
}

// Each kind of sink of package sink is a sink kind: parquet and arrow files
// read back with every sample.
func TestSinkKinds(t *testing.T) {
	dir := t.TempDir()
	pq := filepath.Join(dir, "pq")
	if items, _, err := runFile(t, genFile(21, 8, fmt.Sprintf("{kind: parquet, config: {dir: %q}}", pq), ""), Hooks{}); err != nil || items != 21 {
		t.Fatalf("parquet: %d samples, %v", items, err)
	}
	parts, _ := filepath.Glob(filepath.Join(pq, "*.parquet"))
	rows := int64(0)
	for _, part := range parts {
		f, err := file.OpenParquetFile(part, false)
		if err != nil {
			t.Fatal(err)
		}
		rows += f.NumRows()
		f.Close()
	}
	if rows != 21 {
		t.Fatalf("parquet parts %v hold %d rows, want 21", parts, rows)
	}
	arrowPath := filepath.Join(dir, "out.arrow")
	if items, _, err := runFile(t, genFile(9, 4, fmt.Sprintf("{kind: arrow, config: {path: %q}}", arrowPath), ""), Hooks{}); err != nil || items != 9 {
		t.Fatalf("arrow: %d samples, %v", items, err)
	}
	if st, err := os.Stat(arrowPath); err != nil || st.Size() == 0 {
		t.Fatalf("arrow file: %v", err)
	}
	if _, _, err := runFile(t, genFile(9, 4, "{kind: arrow, config: {}}", ""), Hooks{}); err == nil || !strings.Contains(err.Error(), "one of path and socket") {
		t.Fatalf("arrow without a destination: %v", err)
	}
	// discard of batches is package sink's Null: it saw every batch the summary counts.
	var null *sink.Null
	items, batches, err := runFile(t, genFile(21, 8, "discard", "epochs: 2\n"), Hooks{Sink: func(node string, s sink.Sink) {
		if n, ok := s.(*sink.Null); ok && node == "discard" {
			null = n
		} else {
			t.Errorf("sink %s: %T, want discard's *sink.Null", node, s)
		}
	}})
	if err != nil || items != 42 || batches != 6 {
		t.Fatalf("discard: %d samples in %d batches, %v; want 42 in 6", items, batches, err)
	}
	if null == nil {
		t.Fatal("discard opened no sink.Null")
	}
	if nb, ns, bytes := null.Counts(); nb != 6 || ns != 42 || bytes != 42*3*16*16 {
		t.Fatalf("sink.Null counted %d batches, %d samples, %d bytes; want 6, 42, %d", nb, ns, bytes, 42*3*16*16)
	}
}

// Decoded bytes are reserved from the budget before decoding: an upscale to
// 2000 pixels is charged to the budget (peak well above the encoded bytes).
// No batch: a batch of such images would not fit in the budget, which is
// refused at start (TestBatchThatCannotFitIsRefused).
func TestDecodeReservesDecodedBytes(t *testing.T) {
	yaml := `source: {kind: generate, config: {items: 2, width: 64, height: 48, distinct: 1}}
stages:
  - {kind: decode, config: {resize: 1000, workers: 1}}
sink: discard
resources: {budget: 2MiB, pressure: off}
`
	p, err := Parse("t.yaml", []byte(yaml), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), p, Hooks{})
	if err != nil || sum.Items != 2 {
		t.Fatal(sum.Items, err)
	}
	// One 1333×1000 RGB image is 4 MB: reserved (an overdraft of one image
	// over the 2 MiB budget) before it is decoded.
	if sum.Peak < 3<<20 {
		t.Fatalf("peak budget in use %d bytes: the decoded image was not reserved", sum.Peak)
	}
}

// The pixel limit's error names the option that raises it where the user set
// it: the pipeline file's key, or the front-end's flag.
func TestPixelLimitNamesTheOption(t *testing.T) {
	_, _, err := runFile(t, genFile(4, 2, "discard", ""), Hooks{}, "decode.max_pixels=100")
	if err == nil || !strings.Contains(err.Error(), "raise decode.max_pixels in the pipeline file") {
		t.Fatalf("error %v, want it to name decode.max_pixels", err)
	}
	_, _, err = runFile(t, genFile(4, 2, "discard", ""), Hooks{Option: func(node, param string) string {
		if param == "max_pixels" {
			return "-max-pixels"
		}
		return ""
	}}, "decode.max_pixels=100")
	if err == nil || !strings.Contains(err.Error(), "raise -max-pixels if") {
		t.Fatalf("error %v, want it to name -max-pixels", err)
	}
}

// The skip limit's error names the option that raises it where the user set
// it: the pipeline file's key, or the front-end's flag (psiflow run has no
// -max-skips).
func TestSkipLimitNamesTheOption(t *testing.T) {
	flag := func(node, param string) string {
		if param == "max_skips" {
			return "-max-skips"
		}
		return ""
	}
	for _, tc := range []struct {
		option func(node, param string) string
		want   string
	}{
		{nil, "the limit of 1 (decode.max_skips in the pipeline file (-set decode.max_skips=N))"},
		{flag, "the limit of 1 (-max-skips)"},
	} {
		// Every 64×48 image is over the pixel limit: the second skip breaks the limit of one.
		_, _, err := runFile(t, genFile(6, 2, "discard", ""), Hooks{Option: tc.option}, "decode.max_pixels=1000",
			"decode.on_error=skip", "decode.max_skips=1", "decode.workers=1")
		if err == nil || !strings.Contains(err.Error(), "too many bad samples: 1 skipped already, "+tc.want) {
			t.Errorf("error %v, want it to say %q", err, tc.want)
		}
	}
}

// The floor is summed over the kinds: for the image pipeline, a batch of the
// files' mean size (at least twice the largest, 1 MiB) in the budget, and two
// batches of output plus every decode worker's scratch outside it.
func TestFloorSumsTheKinds(t *testing.T) {
	dir := t.TempDir()
	files, err := synth.JPEGFiles(filepath.Join(dir, "c0"), 8, synth.Image{Width: 200, Height: 150, Quality: 90, Noise: 40}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var total, largest int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		total, largest = total+st.Size(), max(largest, st.Size())
	}
	p := loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}, "decode.workers=3")
	r := &runState{ctx: context.Background(), kept: map[string]any{}, infoSeen: map[string]bool{}, plans: map[int]source.Share{}}
	f, err := floorOf(p, r)
	if err != nil {
		t.Fatal(err)
	}
	wantBudget := max(64*(total/int64(len(files))), 2*largest, 1<<20)
	wantOther := int64(2*64*3*224*224 + 3*scratchPerWorker)
	if f.Budget != wantBudget || f.Other != wantOther || f.Batch != 64 {
		t.Fatalf("floor %+v, want budget %d, other %d, batch 64", f, wantBudget, wantOther)
	}
}

// The sample cache: the second epoch is served from it (decoded: every sample
// a hit), and a random transform refuses a decoded cache.
func TestSampleCache(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.JPEGFiles(filepath.Join(dir, "c0"), 12, synth.Image{Width: 64, Height: 48, Quality: 80}, 1); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"decoded", "encoded"} {
		t.Run(mode, func(t *testing.T) {
			p := loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}, "epochs=2", "decode.resize=20", "decode.center_crop=16",
				"batch.size=5", "resources.cache="+mode, "resources.cache_max=8MiB", "resources.budget=16MiB", "read.direct=false")
			sum, err := Run(context.Background(), p, Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Items != 24 || len(sum.Epochs) != 2 {
				t.Fatalf("%d samples in %d epochs, want 24 in 2", sum.Items, len(sum.Epochs))
			}
			e1, e2 := sum.Epochs[0], sum.Epochs[1]
			if e1.CacheHits != 0 || e1.CacheLookups != 12 || e2.CacheLookups != 12 || e2.CacheHits < 10 || e2.Items != 12 {
				t.Fatalf("epochs %+v, %+v: want no hit in the first, (nearly) every sample a hit in the second", e1, e2)
			}
		})
	}
	// Normalisation: a decoded cache (uint8 tensors) is refused at start,
	// naming both keys; an encoded one serves the second epoch from the cache,
	// normalised float32 batches both times.
	p := loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}, "epochs=2", "decode.resize=20", "decode.center_crop=16",
		"resources.cache=decoded", "decode.normalize=imagenet", "read.direct=false")
	if _, err := Run(context.Background(), p, Hooks{}); err == nil || !strings.Contains(err.Error(), "decode.normalize: imagenet makes them float32; use cache: encoded") {
		t.Fatalf("decoded cache with normalize: %v", err)
	}
	p = loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}, "epochs=2", "decode.resize=20", "decode.center_crop=16", "batch.size=5",
		"resources.cache=encoded", "resources.cache_max=8MiB", "resources.budget=16MiB", "decode.normalize=imagenet", "read.direct=false")
	var mu sync.Mutex
	var dtypes []tensor.DType
	sum, err := Run(context.Background(), p, Hooks{Batches: func(_ context.Context, b *tensor.Batch) error {
		mu.Lock()
		dtypes = append(dtypes, b.Tensor.DType)
		mu.Unlock()
		return nil
	}})
	if err != nil {
		t.Fatalf("encoded cache with normalize: %v", err)
	}
	if len(sum.Epochs) != 2 || sum.Epochs[1].CacheHits < 10 || sum.Items != 24 {
		t.Fatalf("encoded cache with normalize: %d samples, epochs %+v: want 24, the second (nearly) all hits", sum.Items, sum.Epochs)
	}
	if len(dtypes) == 0 {
		t.Fatal("no batch reached the Batches hook")
	}
	for _, d := range dtypes {
		if d != tensor.Float32 {
			t.Fatalf("batch of %v with normalize, want float32", d)
		}
	}
	p = loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}, "resources.cache=decoded", "decode.flip=0.5")
	if _, err := Run(context.Background(), p, Hooks{}); err == nil || !strings.Contains(err.Error(), "use cache: encoded") {
		t.Fatalf("decoded cache with a flip: %v", err)
	}
}
