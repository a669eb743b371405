package pipelines

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/source/synth"
)

// TestWebdatasetSkipsAreNamedAndCounted runs the shipped webdataset.yaml with
// skip_bad over three shards of 10 samples, one cut in the middle: the run
// succeeds, the cut shard's rest is named once through Hooks.Skipped and counted
// in Summary.Skipped and the source's stage counters, and the samples of the
// whole shards all arrive.
func TestWebdatasetSkipsAreNamedAndCounted(t *testing.T) {
	dir := t.TempDir()
	shards, err := synth.TarShards(dir, synth.Shards{Shards: 3, Samples: 10, Image: synth.Image{Width: 32, Height: 32}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(shards[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(shards[1], st.Size()/2+100); err != nil {
		t.Fatal(err)
	}
	p := loadShipped(t, "webdataset.yaml", map[string]string{"DATA": dir}, "source.skip_bad=true", "resources.pressure=off", "resources.budget=64MiB")
	var named []string
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, p, Hooks{Skipped: func(node string, err error) { named = append(named, node+": "+err.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped != 1 || len(named) != 1 || !strings.Contains(named[0], "shards: skipped the rest of the shard") || !strings.Contains(named[0], shards[1]) {
		t.Fatalf("skipped %d, named %q", sum.Skipped, named)
	}
	var stageSkipped int64
	for _, s := range sum.Stages {
		if s.Name == "shards" {
			stageSkipped = s.Skipped
		}
	}
	if stageSkipped != 1 || sum.Items < 20 || sum.Items >= 30 {
		t.Fatalf("stage skipped %d, %d samples", stageSkipped, sum.Items)
	}
}

// TestTarSampleWithoutItsImage: a tar sample that lacks the member decode reads
// fails the run with an error naming the shard, the offset, the sample, the
// member it lacks and the one it has.
func TestTarSampleWithoutItsImage(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range []struct{ name, data string }{{"s0.cls", "1"}} {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(m.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(dir, "a.tar")
	if err := os.WriteFile(shard, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := loadShipped(t, "webdataset.yaml", map[string]string{"DATA": dir}, "resources.pressure=off", "resources.budget=64MiB")
	_, err := runWithin(t, p, Hooks{})
	want := `decode s0: tar ` + shard + ` at offset 0: sample "s0" has no member "s0.jpg" (it has s0.cls)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}
