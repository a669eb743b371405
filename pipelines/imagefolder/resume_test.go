package imagefolder

import (
	"context"
	"slices"
	"testing"

	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/tensor"
)

// TestStartEpochAndOffset runs epochs 3–4 of a shuffled, ordered folder, then
// epoch 3 again from offset 9: the resumed run delivers exactly the rest of
// epoch 3 and then epoch 4, and Plan reports each epoch's share first.
func TestStartEpochAndOffset(t *testing.T) {
	root := writeFolder(t, 21)
	var at []int // keys delivered when each plan came
	run := func(p *pipelines.Pipeline) ([]string, []source.Share) {
		t.Helper()
		var keys []string
		var plans []source.Share
		at = nil
		_, err := pipelines.Run(context.Background(), p, pipelines.Hooks{
			Batches: func(_ context.Context, b *tensor.Batch) error { keys = append(keys, b.Keys...); return nil },
			Plan: func(epoch int, sh source.Share) error {
				at = append(at, len(keys))
				plans = append(plans, sh)
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys, plans
	}
	c := []string{"read.shuffle=true", "read.seed=4", "decode.ordered=true", "epochs=2", "start_epoch=3"}
	full, plans := run(small(t, root, c...))
	if len(full) != 42 || len(plans) != 2 || plans[0].Count != 21 || plans[1].Start != 0 || !slices.Equal(at, []int{0, 21}) {
		t.Fatalf("2 epochs: %d keys, plans %+v", len(full), plans)
	}
	if slices.Equal(full[:21], full[21:]) {
		t.Fatal("epochs 3 and 4 in the same order")
	}
	rest, plans := run(small(t, root, append(c, "start_at=9")...))
	if !slices.Equal(rest, full[9:]) {
		t.Fatalf("resumed at 9:\n got %v\nwant %v", rest, full[9:])
	}
	if plans[0].Start != 9 || plans[0].Count != 12 || plans[1].Start != 0 || !slices.Equal(at, []int{0, 12}) {
		t.Fatalf("plans %+v after %v keys", plans, at)
	}
}

// TestResumeWithCache resumes with the sample cache on: the resumed process
// starts with an empty cache (it lost it) but delivers every sample of the
// rest of the epoch, and every sample of the next, each once.
func TestResumeWithCache(t *testing.T) {
	root := writeFolder(t, 21)
	collect := func(p *pipelines.Pipeline) []string {
		t.Helper()
		var keys []string
		if _, err := pipelines.Run(context.Background(), p, pipelines.Hooks{Batches: func(_ context.Context, b *tensor.Batch) error {
			keys = append(keys, b.Keys...)
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	c := []string{"read.shuffle=true", "read.seed=4", "decode.ordered=true", "epochs=2", "start_epoch=3"}
	full := collect(small(t, root, c...))
	for _, mode := range []string{"decoded", "encoded"} {
		got := collect(small(t, root, append(c, "resources.cache="+mode, "start_at=9")...))
		if len(got) != len(full)-9 {
			t.Fatalf("cache %s: %d samples after the resume, want %d", mode, len(got), len(full)-9)
		}
		for _, part := range []struct{ got, want []string }{{got[:12], full[9:21]}, {got[12:], full[21:]}} {
			a, b := slices.Sorted(slices.Values(part.got)), slices.Sorted(slices.Values(part.want))
			if !slices.Equal(a, b) {
				t.Fatalf("cache %s: delivered %v\nwant the samples of %v", mode, a, b)
			}
		}
	}
}
