package decode

import (
	"image"
	"os"
	"testing"

	"github.com/psiflow/psiflow/tensor"
)

// TestSteadyStateAllocs: once a Decoder (or Processor) has decoded one image
// of a size, decoding more through TurboJPEG allocates nothing (no
// per-image allocations in steady state). Under the race detector
// sync.Pool.Put drops one call block in four on purpose, and purego takes one
// from its pool per C call, so about a quarter of an allocation per C call
// remains there: two calls per image for a whole decode (bound 1), eight
// for a random resized crop decoded in part (libjpeg's calls: bound 3;
// without the race detector the bound is 0 for both). The
// reflection-based purego wrappers used before made 13 per image.
func TestSteadyStateAllocs(t *testing.T) {
	limit, partLimit := 0.0, 0.0
	if raceEnabled {
		limit, partLimit = 1, 3
	}
	gray := image.NewGray(image.Rect(0, 0, 300, 200))
	for i := range gray.Pix {
		gray.Pix[i] = uint8(i * 7)
	}
	norm, err := NewNormalizer([]float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		data     func(t *testing.T) []byte
		fastDCT  bool
		minShort int
		tr       *Transform // nil: Decoder.Decode; else Processor.Process
	}{
		{name: "rgb", data: func(t *testing.T) []byte { return encodeJPEG(t, synthRGB(500, 375, 1, 24), 85) }},
		{name: "rgb fast DCT", data: func(t *testing.T) []byte { return encodeJPEG(t, synthRGB(500, 375, 1, 24), 85) }, fastDCT: true},
		{name: "rgb DCT-scaled 1/2", data: func(t *testing.T) []byte { return encodeJPEG(t, synthRGB(1000, 750, 2, 24), 85) }, minShort: 128},
		{name: "gray", data: func(t *testing.T) []byte { return encodeJPEG(t, gray, 90) }},
		{name: "cmyk", data: func(t *testing.T) []byte {
			b, err := os.ReadFile(goTestdata(t, "video-001.cmyk.jpeg"))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{name: "processor resize+crop CHW", data: func(t *testing.T) []byte { return encodeJPEG(t, synthRGB(500, 375, 1, 24), 85) },
			tr: &Transform{Resize: 256, CenterCrop: 224, Layout: tensor.CHW}},
		{name: "processor random crop flip normalised", data: func(t *testing.T) []byte { return encodeJPEG(t, synthRGB(500, 375, 1, 24), 85) },
			tr: &Transform{Resize: 256, RandomCrop: 224, FlipProb: 0.5, Layout: tensor.CHW, Normalize: norm, Seed: 7}},
		{name: "processor reduced-size resize+crop", data: func(t *testing.T) []byte { return encodeJPEG(t, synthRGB(1024, 768, 1, 24), 85) },
			tr: &Transform{Resize: 256, CenterCrop: 224, Layout: tensor.CHW}},
		{name: "processor random resized crop flip", data: func(t *testing.T) []byte { return encodeJPEG(t, synthRGB(1024, 768, 1, 24), 85) },
			tr: &Transform{RandomResizedCrop: ResizedCrop{Size: 224}, FlipProb: 0.5, Layout: tensor.CHW, Seed: 7}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := c.data(t)
			d := newDecoder(t, BackendTurbo, func(o *Options) { o.FastDCT = c.fastDCT })
			var run func() error
			if c.tr == nil {
				var m Image
				run = func() error { return d.Decode(&m, data, "alloc.jpg", c.minShort) }
			} else {
				p, err := NewProcessor(d, *c.tr)
				if err != nil {
					t.Fatal(err)
				}
				var out tensor.Tensor
				var index int64 // every run another sample: random boxes of every size
				run = func() error {
					index++
					return p.Process(&out, Encoded{Data: data, Key: "alloc.jpg", Index: index})
				}
			}
			warm := 1
			if c.tr != nil && c.tr.Random() {
				warm = 30 // random boxes of many sizes: the scratch reaches its largest
			}
			for range warm { // sizes the reused buffers
				if err := run(); err != nil {
					t.Fatal(err)
				}
			}
			var runErr error
			got := testing.AllocsPerRun(100, func() {
				if err := run(); err != nil && runErr == nil {
					runErr = err
				}
			})
			if runErr != nil {
				t.Fatal(runErr)
			}
			lim := limit
			if c.tr != nil && c.tr.RandomResizedCrop.Size > 0 {
				lim = partLimit
			}
			if got > lim {
				t.Errorf("%v allocations per image in steady state, want ≤ %v", got, lim)
			}
		})
	}
}
