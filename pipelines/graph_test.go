package pipelines

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/tensor"
)

// checkRegistry is the built-ins plus a sink "record" that keeps what it sees.
type record struct {
	mu     sync.Mutex
	labels map[int64]int
	shapes map[string]int
	tensor map[string][]int
	keys   map[string]int
}

func checkRegistry(t *testing.T) (*Registry, *record) {
	t.Helper()
	r := NewRegistry()
	if err := RegisterBuiltins(r); err != nil {
		t.Fatal(err)
	}
	rec := &record{labels: map[int64]int{}, shapes: map[string]int{}, tensor: map[string][]int{}, keys: map[string]int{}}
	err := r.Register(Kind{Name: "record", Role: SinkRole, In: AnyType, Doc: "keeps labels and shapes for the test",
		Build: func(b *Build, _ *Config, in Stream) (Stream, error) {
			in.Sink(b.Name, func(_ context.Context, v any) error {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				switch x := v.(type) {
				case *tensor.Batch:
					for i, l := range x.Labels {
						rec.labels[l]++
						rec.keys[x.Keys[i]]++
					}
					rec.shapes[fmt.Sprint(x.Tensor.DType, x.Tensor.Shape[1:])] += len(x.Keys)
				case *Tensors:
					for i, n := range x.Names {
						rec.tensor[n] = x.Tensors[i].Shape
					}
				}
				return b.Deliver(in.Type.Count(v))
			})
			return Stream{}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return r, rec
}

// Labels are the ImageFolder class indices; the images directly in the root
// belong to no class and are skipped with one notice, as torchvision does.
func TestImageFolderLabelsAndShapes(t *testing.T) {
	dir := t.TempDir()
	im := synth.Image{Width: 60, Height: 40, Quality: 80}
	for c, n := range []int{3, 4} {
		if _, err := synth.JPEGFiles(filepath.Join(dir, fmt.Sprintf("c%d", c)), n, im, 7); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := synth.JPEGFiles(dir, 2, im, 9); err != nil { // two images in the root
		t.Fatal(err)
	}
	reg, rec := checkRegistry(t)
	data, _ := Shipped().(interface{ ReadFile(string) ([]byte, error) }).ReadFile("imagefolder.yaml")
	_, err := Parse("imagefolder.yaml", data, Options{Registry: reg, Env: envOf(map[string]string{"DATA": dir}),
		Set: []string{"sink.kind=x", "resources.budget=16MiB", "read.read_buffers=0", "decode.resize=20", "decode.center_crop=16", "batch.size=3"}})
	if err == nil {
		t.Fatal("sink.kind=x was accepted as a parameter")
	}
	file := `source: {kind: files, name: read, config: {dir: "` + dir + `"}}
stages:
  - {kind: decode, config: {label: folder, resize: 20, center_crop: 16, layout: hwc}}
  - {kind: batch, config: {size: 3}}
  - collate
sink: record
resources: {budget: 16MiB, pressure: off}
`
	p, err := Parse("f.yaml", []byte(file), Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	var info []string
	sum, err := Run(context.Background(), p, Hooks{Info: func(s string) { info = append(info, s) }})
	if err != nil {
		t.Fatal(err)
	}
	notices := 0
	for _, s := range info {
		if strings.Contains(s, "skipped 2 files directly in "+dir) {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d notices of the 2 skipped root files, want 1: %q", notices, info)
	}
	if sum.Items != 7 || rec.labels[0] != 3 || rec.labels[1] != 4 || len(rec.keys) != 7 {
		t.Fatalf("items %d, labels %v, %d distinct keys; want 7, 3×0 and 4×1, 7", sum.Items, rec.labels, len(rec.keys))
	}
	if rec.shapes["uint8 [16 16 3]"] != 7 {
		t.Fatalf("shapes %v, want 7 of uint8 [16 16 3] (HWC)", rec.shapes)
	}
	if sum.Peak <= 0 || sum.Peak > 16<<20 {
		t.Fatalf("peak budget %d, want within (0, 16 MiB]", sum.Peak)
	}
}

func TestFanOutAndMerge(t *testing.T) {
	reg, _ := checkRegistry(t)
	for _, tc := range []struct {
		fanout string
		want   int64
	}{{"broadcast", 2 * 30}, {"roundrobin", 30}, {"", 30}} {
		fanout := ""
		if tc.fanout != "" {
			fanout = "fanout: " + tc.fanout + ", "
		}
		file := `source: {kind: generate, ` + fanout + `config: {items: 30, width: 32, height: 32, distinct: 3}}
stages:
  - {kind: decode, name: small, config: {resize: 16, center_crop: 16}}
  - {kind: decode, name: big, input: generate, config: {resize: 16, center_crop: 16, normalize: imagenet}}
  - {kind: decode, name: again, input: generate, config: {resize: 16, center_crop: 16}}
  - {kind: batch, input: [small, again], config: {size: 7}}
  - {kind: batch, name: b2, input: big, config: {size: 5}}
  - {kind: collate, input: batch}
  - {kind: collate, name: c2, input: b2}
  - {kind: discard, input: c2}
sink: {kind: record, input: collate}
resources: {budget: 8MiB, pressure: off}
`
		_, err := Parse("f.yaml", []byte(file), Options{Registry: reg})
		if err == nil || !errorsContain(err, `"discard" is a sink kind, not a stage`) {
			t.Fatalf("a sink among the stages: %v", err)
		}
		// A second sink is not allowed; count big's branch with a merge instead.
		file = `source: {kind: generate, ` + fanout + `config: {items: 30, width: 32, height: 32, distinct: 3}}
stages:
  - {kind: decode, name: small, config: {resize: 16, center_crop: 16}}
  - {kind: decode, name: again, input: generate, config: {resize: 16, center_crop: 16}}
  - {kind: batch, input: [small, again], config: {size: 7}}
  - collate
sink: record
resources: {budget: 8MiB, pressure: off}
`
		p, err := Parse("f.yaml", []byte(file), Options{Registry: reg})
		if tc.fanout == "broadcast" {
			if err == nil || !errorsContain(err, "sample elements own buffers without reference counts and cannot be broadcast") {
				t.Fatalf("broadcast of samples: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sum, err := Run(context.Background(), p, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Items != tc.want {
			t.Fatalf("%s: %d items, want %d", tc.fanout, sum.Items, tc.want)
		}
		names := map[string]bool{}
		for _, s := range sum.Stages {
			names[s.Name] = true
		}
		if !names["generate.fanout"] || !names["batch.merge"] {
			t.Fatalf("%s: stages %v lack the fan-out or the merge", tc.fanout, names)
		}
	}
}

func errorsContain(err error, s string) bool {
	var l ErrorList
	if !errors.As(err, &l) {
		return false
	}
	for _, e := range l {
		if strings.Contains(e.Msg, s) {
			return true
		}
	}
	return false
}

func TestLimitCancelAndTensors(t *testing.T) {
	reg, rec := checkRegistry(t)
	// limit stops the run early without an error.
	p, err := Parse("f.yaml", []byte(good+"limit: 5\nepochs: 4\nresources: {budget: 8MiB, pressure: off}\n"), Options{Registry: reg,
		Set: []string{"source.width=16", "source.height=16", "source.items=100"}})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), p, Hooks{})
	if err != nil || sum.Items != 5 || sum.Batches != 2 {
		t.Fatalf("limit 5 with batches of 4: %d items in %d batches, %v; want exactly 5 in 2 (the last cut) and no error", sum.Items, sum.Batches, err)
	}
	// A cancelled context ends the run with its error and leaves nothing running (goleak).
	p, err = Parse("f.yaml", []byte(good+"resources: {budget: 8MiB, pressure: off}\n"), Options{Registry: reg,
		Set: []string{"source.items=1000000000", "source.width=16", "source.height=16"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	sum, err = Run(ctx, p, Hooks{Interval: 5 * time.Millisecond, Progress: func(s progress.Snapshot) {
		if s.Items > 0 {
			once.Do(cancel)
		}
	}})
	if !errors.Is(err, context.Canceled) || sum.Items == 0 {
		t.Fatalf("cancelled run: %d items, %v; want some items and context.Canceled", sum.Items, err)
	}
	// Tables to tensors: shapes per column.
	dir := t.TempDir()
	if _, err := synth.ArrowFiles(dir, synth.Table{Files: 1, Batches: 2, Rows: 10, PayloadBytes: 8}, 1); err != nil {
		t.Fatal(err)
	}
	file := `source: {kind: tables, config: {paths: ["` + dir + `/*"], format: arrow}}
stages: [to_tensors]
sink: record
resources: {budget: 8MiB, pressure: off}
`
	if p, err = Parse("f.yaml", []byte(file), Options{Registry: reg}); err != nil {
		t.Fatal(err)
	}
	if sum, err = Run(context.Background(), p, Hooks{}); err != nil || sum.Items != 20 {
		t.Fatalf("tables: %d rows, %v; want 20", sum.Items, err)
	}
	got := fmt.Sprint(rec.tensor["id"], rec.tensor["label"], rec.tensor["score"], rec.tensor["payload"])
	if got != "[10] [10] [10] [10 8]" {
		t.Fatalf("tensor shapes id, label, score, payload = %s, want [10] [10] [10] [10 8]", got)
	}
}

func TestBuildErrorStartsNoGraph(t *testing.T) {
	file := `source: {kind: tar, config: {paths: ["/nonexistent/*.tar"]}}
stages: [decode, batch, collate]
sink: discard
resources: {budget: 8MiB, pressure: off}
`
	p, err := Parse("f.yaml", []byte(file), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), p, Hooks{})
	ran := len(sum.Stages) > 0 // the stages of a graph that ran
	if err == nil || ran || !strings.Contains(err.Error(), `source "tar" (kind tar, f.yaml:1:16)`) {
		t.Fatalf("a source that cannot open: ran %v, %v", ran, err)
	}
}
