package pipelines

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/tensor"
)

// envOf returns an Env lookup over vars only (the test's environment stays out).
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func loadShipped(t testing.TB, name string, env map[string]string, sets ...string) *Pipeline {
	t.Helper()
	data, err := Shipped().(interface{ ReadFile(string) ([]byte, error) }).ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(name, data, Options{Env: envOf(env), Set: sets})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func runWithin(t *testing.T, p *Pipeline, hooks Hooks) (items int64, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, p, hooks)
	return sum.Items, err
}

func TestRunShippedFiles(t *testing.T) {
	dir := t.TempDir()
	im := synth.Image{Width: 64, Height: 48, Quality: 80, Noise: 20}
	// Image folder: two classes of 7 and 5 images.
	for c, n := range []int{7, 5} {
		if _, err := synth.JPEGFiles(filepath.Join(dir, "jpeg", fmt.Sprintf("class%d", c)), n, im, uint64(c+1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := synth.TarShards(filepath.Join(dir, "tar"), synth.Shards{Shards: 3, Samples: 9, Image: im}, 1); err != nil {
		t.Fatal(err)
	}
	tab := synth.Table{Files: 2, Batches: 3, Rows: 50, PayloadBytes: 16}
	if _, err := synth.ParquetFiles(filepath.Join(dir, "parquet"), tab, 1); err != nil {
		t.Fatal(err)
	}
	small := []string{"resources.budget=32MiB", "resources.pressure=off"}
	for _, tc := range []struct {
		file  string
		env   map[string]string
		sets  []string
		items int64
	}{
		{"imagefolder.yaml", map[string]string{"DATA": filepath.Join(dir, "jpeg"), "EPOCHS": "2"}, []string{"decode.resize=32", "decode.center_crop=28", "batch.size=5", "read.read_buffers=8MiB"}, 2 * 12},
		{"webdataset.yaml", map[string]string{"DATA": filepath.Join(dir, "tar")}, []string{"decode.resize=40", "decode.random_crop=32", "batch.size=4"}, 27},
		{"webdataset.yaml", map[string]string{"DATA": filepath.Join(dir, "tar")}, []string{"decode.resize=0", "decode.random_crop=0",
			"decode.random_resized_crop=32", "decode.normalize=custom", "decode.mean=0.5,0.5,0.5", "decode.std=0.2,0.2,0.2", "batch.size=4"}, 27},
		{"tables.yaml", map[string]string{"DATA": filepath.Join(dir, "parquet")}, nil, 2 * 3 * 50},
		{"demo.yaml", map[string]string{"ITEMS": "40"}, []string{"source.width=48", "source.height=40", "decode.resize=24", "decode.center_crop=16"}, 40},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p := loadShipped(t, tc.file, tc.env, append(tc.sets, small...)...)
			var info []string
			items, err := runWithin(t, p, Hooks{Info: func(s string) { info = append(info, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if items != tc.items {
				t.Fatalf("%d samples delivered, want %d", items, tc.items)
			}
			t.Logf("%s: %s", tc.file, strings.Join(info, "; "))
		})
	}
}

// TestRunNextChoosesTheEpochs: with Hooks.Next one run serves the epochs its
// caller asks for, each the same samples in the same order as a run started
// at that epoch and position (psiflow serve's DataLoader over one process).
func TestRunNextChoosesTheEpochs(t *testing.T) {
	dir := t.TempDir()
	im := synth.Image{Width: 40, Height: 32, Quality: 80, Noise: 20}
	for c, n := range []int{7, 5} {
		if _, err := synth.JPEGFiles(filepath.Join(dir, fmt.Sprintf("class%d", c)), n, im, uint64(c+1)); err != nil {
			t.Fatal(err)
		}
	}
	sets := []string{"decode.resize=24", "decode.center_crop=16", "batch.size=5", "read.shuffle=true", "decode.ordered=true",
		"read.read_buffers=8MiB", "resources.budget=32MiB", "resources.pressure=off"}
	keysOf := func(p *Pipeline, hooks Hooks) []string {
		var keys []string
		hooks.Batches = func(_ context.Context, b *tensor.Batch) error {
			keys = append(keys, b.Keys...)
			return nil
		}
		if _, err := runWithin(t, p, hooks); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	type at struct {
		epoch int
		start int64
	}
	asks := []at{{5, 3}, {2, 0}, {2, 12}}
	var plans []at
	next := 0
	p := loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}, sets...)
	got := keysOf(p, Hooks{
		Plan: func(epoch int, sh source.Share) error { plans = append(plans, at{epoch, sh.Start}); return nil },
		Next: func(context.Context) (int, int64, bool, error) {
			if next == len(asks) {
				return 0, 0, false, nil
			}
			next++
			return asks[next-1].epoch, asks[next-1].start, true, nil
		},
	})
	if want := append([]at{{0, 0}}, asks...); !slices.Equal(plans, want) {
		t.Fatalf("plans %v, want %v", plans, want)
	}
	var want []string
	for _, a := range append([]at{{0, 0}}, asks...) {
		one := loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir},
			append(sets, fmt.Sprintf("start_epoch=%d", a.epoch), fmt.Sprintf("start_at=%d", a.start))...)
		want = append(want, keysOf(one, Hooks{})...)
	}
	if len(want) != 12+9+12 {
		t.Fatalf("the separate runs delivered %d samples, want %d", len(want), 12+9+12)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("one run with Next delivered\n%v\nseparate runs\n%v", got, want)
	}
	// Next's error ends the run; a negative epoch is refused.
	boom := errors.New("boom")
	if _, err := runWithin(t, p, Hooks{Next: func(context.Context) (int, int64, bool, error) { return 0, 0, false, boom }}); !errors.Is(err, boom) {
		t.Fatalf("Next's error: run returned %v", err)
	}
	if _, err := runWithin(t, p, Hooks{Next: func(context.Context) (int, int64, bool, error) { return -1, 0, true, nil }}); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Fatalf("a negative epoch: run returned %v", err)
	}
}

// tensorBytes records the tensor bytes of every decoded image.
type tensorBytes struct {
	mu    sync.Mutex
	sizes map[int64]int
}

func (o *tensorBytes) ObserveDecode(_ int, n int64, _ time.Duration, _ error) {
	o.mu.Lock()
	o.sizes[n]++
	o.mu.Unlock()
}

// TestRunCollateNormalizes: a decode stage that normalises and feeds only
// batch → collate hands collate uint8 images (a quarter of the bytes) and the
// batches hold ImageNet's float32 values of the same pixels; a decode stage
// read by anything else normalises its own images.
func TestRunCollateNormalizes(t *testing.T) {
	dir := t.TempDir()
	im := synth.Image{Width: 40, Height: 32, Quality: 80, Noise: 20}
	if _, err := synth.JPEGFiles(filepath.Join(dir, "class0"), 6, im, 1); err != nil {
		t.Fatal(err)
	}
	sets := []string{"decode.resize=24", "decode.center_crop=16", "batch.size=4", "decode.ordered=true",
		"read.read_buffers=8MiB", "resources.budget=32MiB", "resources.pressure=off"}
	run := func(norm string) (*tensorBytes, []float32, []uint8) {
		p := loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}, append(sets, "decode.normalize="+norm)...)
		obs := &tensorBytes{sizes: map[int64]int{}}
		var f32 []float32
		var u8 []uint8
		_, err := runWithin(t, p, Hooks{Decodes: obs, Batches: func(_ context.Context, b *tensor.Batch) error {
			f32, u8 = append(f32, b.Tensor.F32...), append(u8, b.Tensor.U8...)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return obs, f32, u8
	}
	plain, _, u8 := run("none")
	normed, f32, _ := run("imagenet")
	if want := map[int64]int{3 * 16 * 16: 6}; !maps.Equal(plain.sizes, want) || !maps.Equal(normed.sizes, want) {
		t.Fatalf("decoded tensor sizes %v (none), %v (imagenet), want %v for both", plain.sizes, normed.sizes, want)
	}
	if len(f32) != len(u8) || len(u8) != 6*3*16*16 {
		t.Fatalf("%d float32 values, %d bytes, want %d of each", len(f32), len(u8), 6*3*16*16)
	}
	mean, std := []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}
	for i, v := range u8 {
		c := i / (16 * 16) % 3
		if want := (float32(v)/255 - mean[c]) / std[c]; f32[i] != want {
			t.Fatalf("value %d (channel %d, byte %d): %v, want %v", i, c, v, f32[i], want)
		}
	}
	if !feedsOnly(loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}), "decode", "batch", "collate") {
		t.Fatal("the shipped image folder's decode does not feed only batch → collate")
	}
	reg, _ := checkRegistry(t)
	p, err := Parse("f.yaml", []byte(`source: {kind: generate, config: {items: 4, width: 32, height: 32}}
stages:
  - {kind: decode, name: a, config: {resize: 16, center_crop: 16}}
  - {kind: decode, name: b, input: generate, config: {resize: 16, center_crop: 16}}
  - {kind: batch, input: [a, b], config: {size: 2}}
  - collate
sink: record
resources: {budget: 8MiB, pressure: off}
`), Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if feedsOnly(p, "a", "batch", "collate") {
		t.Fatal("a decode stage merged with another into one batch counted as feeding only batch → collate")
	}
}
