package decode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/tensor"
)

type countObserver struct {
	mu                  sync.Mutex
	ok, failed, inBytes int
	outBytes            int64
}

func (o *countObserver) ObserveDecode(in int, out int64, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inBytes += in
	if err != nil {
		o.failed++
		return
	}
	o.ok++
	o.outBytes += out
}

func TestStageObserver(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	var released atomic.Int64
	var items []*item
	in := 0
	for i := range 6 {
		data := encodeJPEG(t, synthRGB(50+i, 40, uint64(i), 3), 85)
		in += len(data)
		items = append(items, &item{key: fmt.Sprintf("img-%d", i), data: data, released: &released})
	}
	obs := &countObserver{}
	st, err := NewStage("decode", d, StageConfig{Workers: 2, Observer: obs, Transform: Transform{Resize: 20, CenterCrop: 16, Layout: tensor.CHW}}, getItem)
	if err != nil {
		t.Fatal(err)
	}
	g := flow.New("test")
	flow.Sink(flow.Via(flow.FromSlice(g, "items", items), st), "sink", func(ctx context.Context, s *tensor.Sample) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if obs.ok != 6 || obs.failed != 0 || obs.inBytes != in || obs.outBytes != 6*3*16*16 {
		t.Errorf("observer saw %+v, want 6 images, %d bytes in, %d out", obs, in, 6*3*16*16)
	}

	// A failed image is observed as a failure.
	obs = &countObserver{}
	bad := []*item{{key: "bad.jpg", data: items[0].data[:300], released: &released}}
	st, err = NewStage("decode", d, StageConfig{Workers: 1, Observer: obs, Transform: Transform{Resize: 20}}, getItem)
	if err != nil {
		t.Fatal(err)
	}
	g = flow.New("test-bad")
	flow.Sink(flow.Via(flow.FromSlice(g, "items", bad), st), "sink", func(ctx context.Context, s *tensor.Sample) error { return nil })
	if err := g.Run(ctx); err == nil {
		t.Fatal("a truncated JPEG decoded")
	}
	if obs.ok != 0 || obs.failed != 1 || obs.inBytes != 300 {
		t.Errorf("observer saw %+v, want one failure of 300 bytes", obs)
	}
}
