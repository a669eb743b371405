package imagefolder

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/uma/umacache"
)

// epochRecord keeps, per epoch, a checksum of every sample's tensor by key.
type epochRecord struct {
	mu     sync.Mutex
	epochs []map[string]uint64
	dups   []string
}

func (r *epochRecord) consume(_ context.Context, b *tensor.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.epochs[len(r.epochs)-1]
	per := len(b.Tensor.U8) / len(b.Keys)
	for i, k := range b.Keys {
		if _, ok := cur[k]; ok {
			r.dups = append(r.dups, k)
		}
		cur[k] = xxh3.Hash(b.Tensor.U8[i*per : (i+1)*per])
	}
	return nil
}

func (r *epochRecord) next() {
	r.mu.Lock()
	r.epochs = append(r.epochs, map[string]uint64{})
	r.mu.Unlock()
}

// run runs p and records every epoch; onEpoch runs between epochs.
func (r *epochRecord) run(t *testing.T, p *pipelines.Pipeline, onEpoch func(n int, e progress.Epoch), onCache func(*umacache.Cache)) progress.Summary {
	t.Helper()
	r.next()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := pipelines.Run(ctx, p, pipelines.Hooks{Batches: r.consume, OnCache: onCache, OnEpoch: func(n int, e progress.Epoch) {
		if onEpoch != nil {
			onEpoch(n, e)
		}
		if n+1 < p.Epochs {
			r.next()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// sameSamples fails unless got holds exactly the keys of want with the same bytes.
func sameSamples(t *testing.T, what string, got, want map[string]uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d samples, want %d", what, len(got), len(want))
	}
	var bad []string
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("%s: %d samples differ from the uncached run, e.g. %s", what, len(bad), bad[0])
	}
}

func TestCacheServesLaterEpochsExactly(t *testing.T) {
	root := writeFolder(t, 37)
	base := []string{"epochs=3", "read.shuffle=true", "read.seed=5"}
	var ref epochRecord
	ref.run(t, small(t, root, base...), nil, nil)

	tests := []struct {
		name    string
		mode    string
		pageOut float64 // share of entries the kernel is asked to take after epoch 1
		// Bounds of epoch 2's hit rate in percent. How many pages MADV_PAGEOUT
		// really takes is the kernel's decision (pages still in a per-CPU LRU
		// batch are skipped), so reclaimed runs assert bounds.
		minHits, maxHits float64
	}{
		{"decoded", "decoded", 0, 100, 100},
		{"encoded", "encoded", 0, 100, 100},
		{"decoded, half reclaimed", "decoded", 0.5, 1, 99},
		{"encoded, all reclaimed", "encoded", 1, 0, 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := small(t, root, append(base, "resources.cache="+tc.mode, "resources.cache_max=64MiB")...)
			var cache *umacache.Cache
			var rec epochRecord
			sum := rec.run(t, p, func(n int, _ progress.Epoch) {
				if n == 0 && tc.pageOut > 0 {
					if _, err := cache.PageOut(tc.pageOut); err != nil {
						t.Skipf("kernel refuses MADV_PAGEOUT: %v", err)
					}
				}
			}, func(c *umacache.Cache) { cache = c })
			if len(rec.dups) > 0 {
				t.Fatalf("samples delivered twice in one epoch: %v", rec.dups)
			}
			for e := range 3 {
				sameSamples(t, fmt.Sprintf("epoch %d", e+1), rec.epochs[e], ref.epochs[e])
			}
			if len(sum.Epochs) != 3 || sum.Epochs[0].CacheHits != 0 || sum.Epochs[0].CacheLookups != 37 {
				t.Fatalf("epochs %+v", sum.Epochs)
			}
			if hr := sum.Epochs[1].HitRate(); hr < tc.minHits || hr > tc.maxHits {
				t.Fatalf("epoch 2 hit rate %.0f%%, want %.0f–%.0f%% (epochs %+v)", hr, tc.minHits, tc.maxHits, sum.Epochs)
			}
			if sum.Epochs[2].HitRate() != 100 {
				t.Fatalf("epoch 3 hit rate %.0f%%: reclaimed entries were not cached again", sum.Epochs[2].HitRate())
			}
			if st := cache.Stats(); tc.pageOut > 0 && st.Reclaimed == 0 {
				t.Fatalf("stats %+v: the paged-out entries were not noticed", st)
			}
			if sum.Items != 3*37 {
				t.Fatalf("%d samples delivered over 3 epochs, want %d", sum.Items, 3*37)
			}
		})
	}
}
