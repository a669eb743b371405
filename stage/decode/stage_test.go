package decode

import (
	"context"
	"errors"
	"fmt"
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
