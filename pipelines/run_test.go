package pipelines

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/source/synth"
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
