//go:build linux

package pipelines

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/psiflow/psiflow/gpu/h2d"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/uma/umacache"
)

// arenaNames are the arenas of rt's UMA now.
func arenaNames(rt *memory.Runtime) []string {
	var names []string
	for _, a := range rt.UMA().Snapshot().Arenas {
		names = append(names, a.Name)
	}
	return names
}

// TestSampleCacheShed: the sample cache lives in the runtime's UMA, and the
// runtime's shed at Critical reaches it: shed after the first epoch, the cache
// is empty, and the second epoch reads every sample from the files again.
func TestSampleCacheShed(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.JPEGFiles(filepath.Join(dir, "c0"), 12, synth.Image{Width: 64, Height: 48, Quality: 80}, 1); err != nil {
		t.Fatal(err)
	}
	p := loadShipped(t, "imagefolder.yaml", map[string]string{"DATA": dir}, "epochs=2", "decode.resize=20", "decode.center_crop=16",
		"batch.size=5", "resources.cache=encoded", "resources.cache_max=8MiB", "resources.budget=16MiB", "read.direct=false",
		"resources.pressure=gate")
	var rt *memory.Runtime
	var cache *umacache.Cache
	var arenas []string
	var before, after int64
	var shedErr error
	sum, err := Run(context.Background(), p, Hooks{
		Runtime: func(r *memory.Runtime) { rt = r },
		OnCache: func(c *umacache.Cache) { cache = c },
		OnEpoch: func(n int, _ progress.Epoch) {
			if n != 0 {
				return
			}
			arenas = arenaNames(rt)
			before = cache.Stats().Bytes
			shedErr = rt.PressureGate().Shed(context.Background())
			after = cache.Stats().Bytes
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if shedErr != nil {
		t.Fatal(shedErr)
	}
	if !slices.Contains(arenas, "sample-cache") {
		t.Fatalf("the runtime's UMA holds %v, not the sample cache", arenas)
	}
	if runs := rt.ShedRuns()[memory.ActionSampleCache]; runs != 1 {
		t.Fatalf("the sample_cache shed action ran %v times, want 1", runs)
	}
	if before == 0 || after != 0 {
		t.Fatalf("the cache held %d bytes before the shed and %d after; want some, then none (under 1 MiB: all of it goes)", before, after)
	}
	if e2 := sum.Epochs[1]; e2.Items != 12 || e2.CacheHits != 0 {
		t.Fatalf("second epoch %+v: want its 12 samples read again, no hit", e2)
	}
}

// TestPipelineDeviceShed: the staging ring's arena lives in the runtime's UMA
// (one UMA per runtime), and the runtime's shed at Critical runs the ring's
// shed action (what it gives back: gpu/h2d TestRingAfterCopy).
func TestPipelineDeviceShed(t *testing.T) {
	p, err := Parse("dev.yaml", []byte(toDevice), Options{Set: []string{"resources.device=sim", "resources.pressure=gate"}})
	if err != nil {
		t.Fatal(err)
	}
	var rt *memory.Runtime
	var arenas []string
	var shedErr error
	shed := false
	if _, err := Run(context.Background(), p, Hooks{
		Runtime: func(r *memory.Runtime) { rt = r },
		DeviceBatches: func(ctx context.Context, b *h2d.DeviceBatch) error {
			if shed {
				return nil
			}
			shed = true
			arenas = arenaNames(rt)
			shedErr = rt.PressureGate().Shed(ctx)
			return nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	if shedErr != nil {
		t.Fatal(shedErr)
	}
	if !slices.Contains(arenas, "staging pin") {
		t.Fatalf("the runtime's UMA holds %v, not the staging ring", arenas)
	}
	if runs := rt.ShedRuns()[memory.ActionStagingRing]; runs != 1 {
		t.Fatalf("the staging_ring shed action ran %v times, want 1", runs)
	}
}
