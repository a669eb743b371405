package decode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/tensor"
)

// item is a test input that counts its releases.
type item struct {
	key      string
	data     []byte
	label    int64
	released *atomic.Int64
}

func (it *item) Release() { it.released.Add(1) }

func getItem(it *item) Encoded { return Encoded{Key: it.key, Data: it.data, Label: it.label} }

func TestStageGraph(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	var released atomic.Int64
	var items []*item
	for i := 0; i < 10; i++ {
		w, h := 60+i*7, 50+i*3
		data := encodeJPEG(t, synthRGB(w, h, uint64(i), 6), 85)
		if i%3 == 0 {
			data = encodePNG(t, synthRGB(w, h, uint64(i), 6))
		}
		items = append(items, &item{key: fmt.Sprintf("img-%d", i), data: data, label: int64(i), released: &released})
	}
	for _, ordered := range []bool{false, true} {
		for _, workers := range []int{1, 3} {
			t.Run(fmt.Sprintf("ordered=%v/workers=%d", ordered, workers), func(t *testing.T) {
				released.Store(0)
				st, err := NewStage("decode", d, StageConfig{Workers: workers, Ordered: ordered,
					Transform: Transform{Resize: 40, CenterCrop: 32, Layout: tensor.CHW, Normalize: ImageNet()}}, getItem)
				if err != nil {
					t.Fatal(err)
				}
				g := flow.New("test")
				s := flow.FromSlice(g, "items", items)
				dec := flow.Via(s, st)
				batches := flow.Via(dec, stage.Batch[*tensor.Sample]("batch", 4, 0))
				col := flow.Via(batches, tensor.Collate("collate"))
				var got []*tensor.Batch
				flow.Collect(col, "sink", &got)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := g.Run(ctx); err != nil {
					t.Fatal(err)
				}
				if released.Load() != int64(len(items)) {
					t.Errorf("%d inputs released, want %d", released.Load(), len(items))
				}
				n := 0
				for bi, b := range got {
					if b.Tensor.DType != tensor.Float32 || len(b.Tensor.Shape) != 4 || b.Tensor.Shape[1] != 3 || b.Tensor.Shape[2] != 32 || b.Tensor.Shape[3] != 32 {
						t.Fatalf("batch %d: %v %v", bi, b.Tensor.DType, b.Tensor.Shape)
					}
					for i, k := range b.Keys {
						if ordered && k != items[n].key {
							t.Errorf("ordered: batch %d position %d is %s, want %s", bi, i, k, items[n].key)
						}
						if want := fmt.Sprintf("img-%d", b.Labels[i]); k != want {
							t.Errorf("label %d travelled with %s", b.Labels[i], k)
						}
						n++
					}
					b.Release()
				}
				if n != len(items) {
					t.Errorf("%d samples out, want %d", n, len(items))
				}
			})
		}
	}
}

func TestStageErrorNamesSample(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	var released atomic.Int64
	items := []*item{
		{key: "good.jpg", data: encodeJPEG(t, synthRGB(40, 40, 1, 3), 85), released: &released},
		{key: "bad/truncated.jpg", data: encodeJPEG(t, synthRGB(40, 40, 2, 3), 85)[:300], released: &released},
	}
	st, err := NewStage("decode", d, StageConfig{Workers: 2, Transform: Transform{Resize: 20}}, getItem)
	if err != nil {
		t.Fatal(err)
	}
	g := flow.New("test")
	out := flow.Via(flow.FromSlice(g, "items", items), st)
	flow.Sink(out, "sink", func(ctx context.Context, s *tensor.Sample) error { return nil }) // the graph releases s
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = g.Run(ctx)
	var de *Error
	if !errors.As(err, &de) || de.Name != "bad/truncated.jpg" || !strings.Contains(err.Error(), "bad/truncated.jpg") {
		t.Fatalf("Run = %v, want a decode error naming bad/truncated.jpg", err)
	}
}

func TestStageConfigErrors(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	if _, err := NewStage("x", d, StageConfig{Workers: 0}, getItem); err == nil {
		t.Error("zero workers accepted")
	}
	if _, err := NewStage("x", d, StageConfig{Workers: 1, Transform: Transform{CenterCrop: 2, RandomCrop: 2}}, getItem); err == nil {
		t.Error("invalid transform accepted")
	}
	if _, err := NewStage[*item]("x", nil, StageConfig{Workers: 1}, getItem); err == nil {
		t.Error("nil decoder accepted")
	}
}

// TestStageCollateNormalizes: with CollateNormalizes the samples stay uint8
// with the table, a quarter of the bytes, and collate makes the same float32
// batches, bit for bit, as the stage normalising each sample itself (the
// training transform: random resized crops and flips).
func TestStageCollateNormalizes(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	var released atomic.Int64
	var items []*item
	for i := range 9 {
		data := encodeJPEG(t, synthRGB(70+i*5, 60+i*3, uint64(i), 6), 85)
		items = append(items, &item{key: fmt.Sprintf("img-%d", i), data: data, label: int64(i), released: &released})
	}
	get := func(it *item) Encoded {
		return Encoded{Key: it.key, Data: it.data, Label: it.label, Index: it.label, Epoch: 3}
	}
	tr := Transform{RandomResizedCrop: ResizedCrop{Size: 24}, FlipProb: 0.5, Layout: tensor.CHW, Normalize: ImageNet(), Seed: 7}
	run := func(collateNormalizes bool) (batches [][]float32, sampleBytes []int64) {
		st, err := NewStage("decode", d, StageConfig{Workers: 2, Ordered: true, Transform: tr, CollateNormalizes: collateNormalizes}, get)
		if err != nil {
			t.Fatal(err)
		}
		g := flow.New("test")
		dec := flow.Via(flow.FromSlice(g, "items", items), st)
		dec = flow.Tap(dec, "sizes", func(s *tensor.Sample) {
			sampleBytes = append(sampleBytes, s.Size())
			if (s.Normalize != nil) != collateNormalizes || (s.Tensor.DType == tensor.Uint8) != collateNormalizes {
				t.Errorf("%s: %v with a table %v, CollateNormalizes %v", s.Key, s.Tensor.DType, s.Normalize != nil, collateNormalizes)
			}
		})
		col := flow.Via(flow.Via(dec, stage.Batch[*tensor.Sample]("batch", 4, 0)), tensor.Collate("collate"))
		var got []*tensor.Batch
		flow.Collect(col, "sink", &got)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.Run(ctx); err != nil {
			t.Fatal(err)
		}
		for _, b := range got {
			if b.Tensor.DType != tensor.Float32 {
				t.Fatalf("batch of %v", b.Tensor.DType)
			}
			batches = append(batches, slices.Clone(b.Tensor.F32))
			b.Release()
		}
		return batches, sampleBytes
	}
	want, wantBytes := run(false)
	got, gotBytes := run(true)
	if len(got) != len(want) || len(got) != 3 {
		t.Fatalf("%d batches, want %d (3)", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs when collate normalises", i)
		}
	}
	for i := range wantBytes {
		if gotBytes[i]*4 != wantBytes[i] {
			t.Fatalf("sample %d: %d bytes in flight, want a quarter of %d", i, gotBytes[i], wantBytes[i])
		}
	}
}
