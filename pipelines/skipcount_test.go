package pipelines

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/metrics"
	"github.com/psiflow/psiflow/source/synth"
)

// TestReadAndDecodeSkipsCountedApart runs an ImageFolder of 12 images over two
// epochs under decode's on_error: skip, with one file removed after the listing
// (a read skip in each epoch) and one that is not an image (a decode skip in
// each epoch): the summary counts 2 read skips and 2 decode skips (they used to
// be one count), and psiflow_read_skipped_total and
// psiflow_decode_skipped_total say the same.
func TestReadAndDecodeSkipsCountedApart(t *testing.T) {
	dir := t.TempDir()
	paths, err := synth.JPEGFiles(filepath.Join(dir, "c0"), 12, synth.Image{Width: 60, Height: 40, Quality: 80}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[3], []byte("not an image at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, rec := checkRegistry(t)
	file := `epochs: 2
source: {kind: files, name: read, config: {dir: "` + dir + `"}}
stages:
  - {kind: decode, config: {label: folder, resize: 20, center_crop: 16, on_error: skip}}
  - {kind: batch, config: {size: 4}}
  - collate
sink: record
resources: {budget: 16MiB, pressure: off}
`
	p, err := Parse("f.yaml", []byte(file), Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	mreg := prometheus.NewRegistry()
	reads, err := metrics.NewReads(mreg)
	if err != nil {
		t.Fatal(err)
	}
	decodes, err := metrics.NewDecodes(mreg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // the read and decode stages skip from goroutines of their own
	var named []string
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, p, Hooks{
		Ready: func() error { return os.Remove(paths[7]) },
		Skipped: func(node string, err error) {
			mu.Lock()
			defer mu.Unlock()
			named = append(named, node+": "+err.Error())
		},
		Reads: reads, Decodes: decodes,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ReadSkipped != 2 || sum.DecodeSkipped != 2 || sum.Skipped != 4 {
		t.Errorf("skipped %d: %d read, %d decode; want 4: 2 and 2 (named: %q)", sum.Skipped, sum.ReadSkipped, sum.DecodeSkipped, named)
	}
	if sum.Items != 20 || len(rec.keys) != 10 {
		t.Errorf("%d samples, %d distinct; want 20 and 10", sum.Items, len(rec.keys))
	}
	var reads0, decodes0 int
	for _, n := range named {
		switch {
		case strings.HasPrefix(n, "read: ") && strings.Contains(n, paths[7]):
			reads0++
		case strings.HasPrefix(n, "decode: ") && strings.Contains(n, paths[3]):
			decodes0++
		}
	}
	if reads0 != 2 || decodes0 != 2 || len(named) != 4 {
		t.Errorf("skips named %q, want %s twice by read and %s twice by decode", named, paths[7], paths[3])
	}
	got := map[string]float64{}
	mfs, err := mreg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if c := m.GetCounter(); c != nil {
				got[mf.GetName()] += c.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{"psiflow_read_skipped_total": 2, "psiflow_decode_skipped_total": 2} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprint(got))
	}
}
