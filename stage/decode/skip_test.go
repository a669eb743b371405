package decode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/tensor"
)

// sizedItem is an input whose compressed size the source reserves from the
// graph's budget.
type sizedItem struct{ item }

func (s *sizedItem) Size() int64 { return int64(len(s.data)) }

func getSized(s *sizedItem) Encoded { return getItem(&s.item) }

// mixedItems returns n samples of which every bad(i)-th is a hostile input
// (truncated, a bomb header, garbage, empty), the rest small good images.
func mixedItems(t *testing.T, n int, bad func(int) bool, released *atomic.Int64) []*sizedItem {
	t.Helper()
	good := [][]byte{
		encodeJPEG(t, synthRGB(48, 40, 1, 3), 85),
		encodePNG(t, synthRGB(40, 48, 2, 0)),
		encodeJPEG(t, synthRGB(64, 32, 3, 3), 90),
	}
	hostile := [][]byte{
		good[0][:len(good[0])/2],
		bombPNG(t, 100000, 100000, false),
		[]byte("<html>not an image</html>"),
		nil,
		withSOFSize(t, good[2], 30000, 30000),
	}
	items := make([]*sizedItem, n)
	for i := range items {
		data := good[i%len(good)]
		if bad(i) {
			data = hostile[i%len(hostile)]
		}
		items[i] = &sizedItem{item{key: fmt.Sprintf("k%04d", i), data: data, label: int64(i), released: released}}
	}
	return items
}

// TestStageSkip runs a graph over good and hostile samples with the skip
// policy and counts every key: each good sample is delivered exactly once, in
// order when ordered, the last partial batch included; each bad one is
// logged and counted, never delivered.
func TestStageSkip(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	const n = 203 // batches of 8: the last one is partial
	bad := func(i int) bool { return i%7 == 2 || i == n-1 }
	for _, ordered := range []bool{false, true} {
		for _, workers := range []int{1, 3} {
			t.Run(fmt.Sprintf("ordered=%v/workers=%d", ordered, workers), func(t *testing.T) {
				var released atomic.Int64
				items := mixedItems(t, n, bad, &released)
				var mu sync.Mutex
				logged := map[string]string{}
				st, err := NewStage("decode", d, StageConfig{Workers: workers, Ordered: ordered,
					Transform: Transform{Resize: 32, CenterCrop: 24, Layout: tensor.CHW},
					Skip: stage.SkipPolicy{OnError: stage.Skip, Log: func(key string, err error) {
						mu.Lock()
						logged[key] = err.Error()
						mu.Unlock()
					}}}, getSized)
				if err != nil {
					t.Fatal(err)
				}
				g := flow.New("test", flow.WithBudget(1<<20))
				col := flow.Via(flow.Via(flow.Via(flow.FromSlice(g, "items", items), st), stage.Batch[*tensor.Sample]("batch", 8, 0)), tensor.Collate("collate"))
				var keys []string
				var last int
				flow.Sink(col, "sink", func(ctx context.Context, b *tensor.Batch) error {
					keys = append(keys, b.Keys...)
					last = len(b.Keys)
					return nil
				})
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := g.Run(ctx); err != nil {
					t.Fatal(err)
				}
				seen := map[string]int{}
				for _, k := range keys {
					seen[k]++
				}
				nbad := 0
				for i, it := range items {
					switch {
					case bad(i):
						nbad++
						if seen[it.key] != 0 {
							t.Errorf("bad sample %s delivered", it.key)
						}
						if !strings.Contains(logged[it.key], it.key) {
							t.Errorf("bad sample %s logged as %q", it.key, logged[it.key])
						}
					case seen[it.key] != 1:
						t.Errorf("good sample %s delivered %d times", it.key, seen[it.key])
					}
				}
				if len(keys) != n-nbad || len(logged) != nbad {
					t.Errorf("%d delivered, %d logged; want %d and %d", len(keys), len(logged), n-nbad, nbad)
				}
				if want := (n - nbad) % 8; want != 0 && last != want {
					t.Errorf("last batch has %d samples, want %d", last, want)
				}
				if ordered {
					for i := 1; i < len(keys); i++ {
						if keys[i] <= keys[i-1] {
							t.Fatalf("order broken: %s after %s", keys[i], keys[i-1])
						}
					}
				}
				var skipped int64 = -1
				for _, s := range g.Stats() {
					if s.Name == "decode" {
						skipped = s.Skipped
					}
				}
				if skipped != int64(nbad) {
					t.Errorf("stats say %d skipped, want %d", skipped, nbad)
				}
				if released.Load() != n {
					t.Errorf("%d inputs released, want %d", released.Load(), n)
				}
				if u := g.Budget().InUse(); u != 0 {
					t.Errorf("%d budget bytes still in use", u)
				}
			})
		}
	}
}

func TestStageSkipLimit(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	var released atomic.Int64
	items := mixedItems(t, 60, func(i int) bool { return i%10 == 5 }, &released)
	st, err := NewStage("decode", d, StageConfig{Workers: 2, Transform: Transform{Resize: 32},
		Skip: stage.SkipPolicy{OnError: stage.Skip, MaxSkips: 2}}, getSized)
	if err != nil {
		t.Fatal(err)
	}
	g := flow.New("test")
	flow.Sink(flow.Via(flow.FromSlice(g, "items", items), st), "sink", func(context.Context, *tensor.Sample) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = g.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "the limit of 2 (SkipPolicy.MaxSkips)") || !strings.Contains(err.Error(), "k0025") {
		t.Fatalf("Run = %v, want the third bad sample (k0025) to stop it", err)
	}
}

// TestStageBudget: decoded bytes are reserved from the budget. With room,
// every image fits; with a budget smaller than one image, every image is
// decoded on a bounded overdraft (never more than one image beyond the
// limit) instead of a deadlock; without a pixel limit such an image is
// refused.
func TestStageBudget(t *testing.T) {
	var released atomic.Int64
	var items []*sizedItem
	for i := range 24 {
		items = append(items, &sizedItem{item{key: fmt.Sprintf("k%02d", i), data: encodeJPEG(t, synthRGB(320, 240, uint64(i), 3), 85), released: &released}})
	}
	run := func(t *testing.T, d *Decoder, budget int64) (*ReserveStats, *flow.Graph, error) {
		var stats ReserveStats
		g := flow.New("test", flow.WithBudget(budget))
		st2, err := NewStage("decode", d, StageConfig{Workers: 3, Transform: Transform{Resize: 200, CenterCrop: 160}, Budget: g.Budget(), Stats: &stats}, getSized)
		if err != nil {
			t.Fatal(err)
		}
		col := flow.Via(flow.Via(flow.Via(flow.FromSlice(g, "items", items), st2), stage.Batch[*tensor.Sample]("batch", 4, 0)), tensor.Collate("collate"))
		n := 0
		flow.Sink(col, "sink", func(ctx context.Context, b *tensor.Batch) error { n += len(b.Keys); return nil })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = g.Run(ctx)
		if err == nil && n != len(items) {
			t.Errorf("%d samples delivered, want %d", n, len(items))
		}
		if u := g.Budget().InUse(); u != 0 {
			t.Errorf("%d budget bytes still in use", u)
		}
		return &stats, g, err
	}
	t.Run("room", func(t *testing.T) {
		stats, g, err := run(t, newDecoder(t, BackendAuto), 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Reserved.Load() != int64(len(items)) || stats.Overdrafts.Load() != 0 {
			t.Errorf("reserved %d, overdrafts %d", stats.Reserved.Load(), stats.Overdrafts.Load())
		}
		// decoded bytes were counted: the peak is above the compressed bytes alone
		if stats.MaxImageBytes.Load() < 320*240*3 || g.Budget().MaxInUse() < stats.MaxImageBytes.Load() {
			t.Errorf("max image %d bytes, budget peak %d", stats.MaxImageBytes.Load(), g.Budget().MaxInUse())
		}
	})
	t.Run("smaller than one image", func(t *testing.T) {
		const limit = 200 << 10
		stats, g, err := run(t, newDecoder(t, BackendAuto), limit)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Overdrafts.Load() != int64(len(items)) {
			t.Errorf("overdrafts %d, want %d", stats.Overdrafts.Load(), len(items))
		}
		if peak, bound := g.Budget().MaxInUse(), limit+stats.MaxImageBytes.Load(); peak > bound {
			t.Errorf("budget peak %d beyond the limit plus one image (%d)", peak, bound)
		}
	})
	t.Run("no pixel limit", func(t *testing.T) {
		_, _, err := run(t, newDecoder(t, BackendAuto, func(o *Options) { o.MaxPixels = -1 }), 200<<10)
		if err == nil || !strings.Contains(err.Error(), "more than the whole byte budget") || !strings.Contains(err.Error(), "decode k") {
			t.Fatalf("Run = %v, want a refusal naming the sample", err)
		}
	})
}
