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
	"github.com/psiflow/psiflow/tensor"
)

// input is an Input that counts its releases.
type input struct {
	item
	index, epoch int64
	err          error
}

func (in *input) EncodedImage() (string, []byte, int64, int64, error) {
	return in.key, in.data, in.index, in.epoch, in.err
}

// inputs makes n images of distinct sizes, every third a PNG.
func inputs(t *testing.T, n int, epoch int64, released *atomic.Int64) []*input {
	var out []*input
	for i := range n {
		w, h := 90+i*7, 70+i*3
		data := encodeJPEG(t, synthRGB(w, h, uint64(i), 6), 85)
		if i%3 == 0 {
			data = encodePNG(t, synthRGB(w, h, uint64(i), 6))
		}
		out = append(out, &input{item: item{key: fmt.Sprintf("img-%d", i), data: data, released: released}, index: int64(i), epoch: epoch})
	}
	return out
}

// TestImagesAsNewStage: Images gives, image for image, what NewStage with the
// same transform and the accessor it stands for gives, under a random
// transform too (the index and epoch reach the draws), with label -1; it
// reserves each image's decoded bytes from the graph's budget, releases every
// input, and closes the decoder it owns when the stage ends.
func TestImagesAsNewStage(t *testing.T) {
	tr := Transform{RandomResizedCrop: ResizedCrop{Size: 48}, FlipProb: 0.5, Seed: 7, Layout: tensor.CHW}
	var released atomic.Int64
	for _, epoch := range []int64{0, 3} {
		in := inputs(t, 12, epoch, &released)
		run := func(images bool) (map[string][]uint8, *flow.Graph) {
			released.Store(0)
			g := flow.New("g", flow.WithBudget(64<<20))
			src := flow.FromSlice(g, "items", in)
			var out flow.Stream[*tensor.Sample]
			if images {
				out = Images(src, "decode", tr)
			} else {
				st, err := NewStage("decode", newDecoder(t, BackendAuto), StageConfig{Workers: 2, Transform: tr},
					func(v *input) Encoded {
						return Encoded{Key: v.key, Data: v.data, Label: -1, Index: v.index, Epoch: v.epoch}
					})
				if err != nil {
					t.Fatal(err)
				}
				out = flow.Via(src, st)
			}
			got := map[string][]uint8{}
			flow.Sink(out, "sink", func(_ context.Context, s *tensor.Sample) error {
				if s.Label != -1 {
					return fmt.Errorf("%s: label %d, want -1", s.Key, s.Label)
				}
				got[s.Key] = slices.Clone(s.Tensor.U8)
				return nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := g.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if r := released.Load(); r != int64(len(in)) {
				t.Errorf("%d of %d inputs released", r, len(in))
			}
			return got, g
		}
		a, g := run(true)
		b, _ := run(false)
		if len(a) != len(in) || len(b) != len(in) {
			t.Fatalf("epoch %d: %d and %d samples, want %d", epoch, len(a), len(b), len(in))
		}
		for k, v := range a {
			if !slices.Equal(v, b[k]) {
				t.Errorf("epoch %d: %s differs from NewStage's", epoch, k)
			}
		}
		// The smallest image's decoded RGB bytes (90×70), at least, were reserved.
		if m := g.Budget().MaxInUse(); m < 90*70*3 {
			t.Errorf("epoch %d: the budget peaked at %d bytes: decoding reserved nothing", epoch, m)
		}
		if u := g.Budget().InUse(); u != 0 {
			t.Errorf("epoch %d: %d bytes in use after Run", epoch, u)
		}
	}

	// The stage's own decoder is closed once it has run.
	var made []*Decoder
	defer func(f func() (*Decoder, error)) { imagesDecoder = f }(imagesDecoder)
	imagesDecoder = func() (*Decoder, error) {
		d, err := NewDecoder(Options{})
		made = append(made, d)
		return d, err
	}
	g := flow.New("closed")
	out := Images(flow.FromSlice(g, "items", inputs(t, 2, 0, &released)), "decode", Transform{Resize: 32})
	flow.Sink(out, "sink", func(context.Context, *tensor.Sample) error { return nil })
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(made) != 1 {
		t.Fatalf("%d decoders made, want 1", len(made))
	}
	made[0].mu.Lock()
	closed, free := made[0].closed, len(made[0].free)
	made[0].mu.Unlock()
	if !closed || free != 0 {
		t.Errorf("after Run the stage's decoder is closed %v, with %d pooled handles", closed, free)
	}
}

// TestImagesErrors: a transform that cannot work is reported by Run, naming
// the stage, before anything starts; an input without an image stops the
// graph with its error, naming it.
func TestImagesErrors(t *testing.T) {
	var released atomic.Int64
	g := flow.New("bad")
	out := Images(flow.FromSlice(g, "items", inputs(t, 2, 0, &released)), "decode", Transform{CenterCrop: -1})
	flow.Sink(out, "sink", func(context.Context, *tensor.Sample) error { t.Error("a sample went through"); return nil })
	if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), `stage "decode"`) {
		t.Fatalf("bad transform: Run = %v", err)
	}
	if released.Load() != 0 {
		t.Errorf("bad transform: %d inputs read, want none (nothing starts)", released.Load())
	}

	missing := errors.New("sample x has no member x.jpg")
	in := inputs(t, 3, 0, &released)
	in[1].err, in[1].data = missing, nil
	g = flow.New("missing")
	out = Images(flow.FromSlice(g, "items", in), "decode", Transform{Resize: 32})
	flow.Sink(out, "sink", func(context.Context, *tensor.Sample) error { return nil })
	err := g.Run(context.Background())
	if !errors.Is(err, missing) || !strings.Contains(err.Error(), "img-1") {
		t.Fatalf("missing image: Run = %v, want the input's error naming img-1", err)
	}
}
