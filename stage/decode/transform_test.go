package decode

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/tensor"
)

// seq returns a w×h×c image whose bytes count up (mod 251), so moved or
// mirrored pixels are recognisable.
func seq(w, h, c int) *Image {
	m := &Image{}
	m.Reset(w, h, c)
	for i := range m.Pix {
		m.Pix[i] = uint8(i % 251)
	}
	return m
}

func at(m *Image, x, y, c int) uint8 { return m.Pix[(y*m.W+x)*m.C+c] }

func TestShorterSide(t *testing.T) {
	cases := []struct{ w, h, n, ww, wh int }{
		{500, 375, 256, 341, 256},
		{375, 500, 256, 256, 341},
		{333, 500, 256, 256, 384},
		{256, 256, 256, 256, 256},
		{100, 100, 256, 256, 256},
		{1000, 3, 2, 666, 2},
	}
	for _, c := range cases {
		if w, h := ShorterSide(c.w, c.h, c.n); w != c.ww || h != c.wh {
			t.Errorf("ShorterSide(%d, %d, %d) = %d×%d, want %d×%d", c.w, c.h, c.n, w, h, c.ww, c.wh)
		}
	}
}

func TestCenterOffset(t *testing.T) {
	// Python's round is half to even: round(58.5) = 58, round(0.5) = 0, round(1.5) = 2.
	cases := []struct{ iw, ih, w, h, x, y int }{
		{341, 256, 224, 224, 58, 16},
		{225, 227, 224, 224, 0, 2},
		{224, 224, 224, 224, 0, 0},
		{384, 256, 224, 224, 80, 16},
	}
	for _, c := range cases {
		if x, y := CenterOffset(c.iw, c.ih, c.w, c.h); x != c.x || y != c.y {
			t.Errorf("CenterOffset(%d×%d → %d×%d) = (%d, %d), want (%d, %d)", c.iw, c.ih, c.w, c.h, x, y, c.x, c.y)
		}
	}
}

func TestCrops(t *testing.T) {
	src := seq(10, 7, 3)
	t.Run("center", func(t *testing.T) {
		var dst Image
		if err := CenterCrop(&dst, src, 4, 3); err != nil {
			t.Fatal(err)
		}
		// offset (3, 2)
		for y := 0; y < 3; y++ {
			for x := 0; x < 4; x++ {
				for c := 0; c < 3; c++ {
					if at(&dst, x, y, c) != at(src, x+3, y+2, c) {
						t.Fatalf("pixel (%d,%d,%d) wrong", x, y, c)
					}
				}
			}
		}
	})
	t.Run("center-pad", func(t *testing.T) {
		var dst Image
		if err := CenterCrop(&dst, src, 14, 5); err != nil {
			t.Fatal(err)
		}
		// torchvision: pad left (14-10)/2 = 2, right 2; crop top round((7-5)/2) = 1.
		for y := 0; y < 5; y++ {
			for x := 0; x < 14; x++ {
				for c := 0; c < 3; c++ {
					var want uint8
					if sx := x - 2; sx >= 0 && sx < 10 {
						want = at(src, sx, y+1, c)
					}
					if got := at(&dst, x, y, c); got != want {
						t.Fatalf("pixel (%d,%d,%d) = %d, want %d", x, y, c, got, want)
					}
				}
			}
		}
	})
	t.Run("crop-outside", func(t *testing.T) {
		var dst Image
		if err := Crop(&dst, src, 8, 0, 4, 4); err == nil || !strings.Contains(err.Error(), "outside") {
			t.Fatalf("Crop outside = %v", err)
		}
		if err := RandomCrop(&dst, src, 11, 2, rand.New(rand.NewPCG(1, 2))); err == nil {
			t.Fatal("RandomCrop larger than the image accepted")
		}
	})
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		seen := map[[2]int]int{}
		var dst Image
		for i := 0; i < 400; i++ {
			if err := RandomCrop(&dst, src, 8, 6, rng); err != nil {
				t.Fatal(err)
			}
			// locate the crop by its first byte
			first := int(dst.Pix[0])
			found := false
			for y := 0; y <= 1 && !found; y++ {
				for x := 0; x <= 2; x++ {
					if int(at(src, x, y, 0)) == first {
						seen[[2]int{x, y}]++
						found = true
						break
					}
				}
			}
			if !found {
				t.Fatalf("crop does not start at a valid position")
			}
		}
		if len(seen) != 6 { // 3 × 2 positions
			t.Errorf("random crop visited %d of 6 positions: %v", len(seen), seen)
		}
		// same seed, same crops
		a, b := rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 9))
		var da, db Image
		for i := 0; i < 10; i++ {
			_ = RandomCrop(&da, src, 5, 5, a)
			_ = RandomCrop(&db, src, 5, 5, b)
			if string(da.Pix) != string(db.Pix) {
				t.Fatal("same seed gave different crops")
			}
		}
	})
}

func TestHFlip(t *testing.T) {
	for _, c := range []int{1, 3, 4} {
		for _, w := range []int{1, 2, 5} {
			src := seq(w, 3, c)
			m := &Image{}
			m.Reset(w, 3, c)
			copy(m.Pix, src.Pix)
			HFlip(m)
			for y := 0; y < 3; y++ {
				for x := 0; x < w; x++ {
					for k := 0; k < c; k++ {
						if at(m, x, y, k) != at(src, w-1-x, y, k) {
							t.Fatalf("c=%d w=%d: pixel (%d,%d,%d) not mirrored", c, w, x, y, k)
						}
					}
				}
			}
		}
	}
}

func TestResizeProperties(t *testing.T) {
	var r Resizer
	t.Run("constant", func(t *testing.T) {
		src := &Image{}
		src.Reset(97, 61, 3)
		for i := range src.Pix {
			src.Pix[i] = uint8(40 + i%3*50)
		}
		for _, sz := range [][2]int{{10, 10}, {97, 30}, {200, 61}, {301, 199}, {1, 1}} {
			var dst Image
			if err := r.Resize(&dst, src, sz[0], sz[1]); err != nil {
				t.Fatal(err)
			}
			for i, v := range dst.Pix {
				if want := uint8(40 + i%3*50); v != want {
					t.Fatalf("%v: byte %d = %d, want %d", sz, i, v, want)
				}
			}
		}
	})
	t.Run("identity", func(t *testing.T) {
		src := seq(13, 9, 3)
		var dst Image
		if err := r.Resize(&dst, src, 13, 9); err != nil {
			t.Fatal(err)
		}
		if string(dst.Pix) != string(src.Pix) {
			t.Fatal("identity resize changed the image")
		}
	})
	t.Run("invalid", func(t *testing.T) {
		var dst Image
		if err := r.Resize(&dst, seq(4, 4, 3), 0, 3); err == nil {
			t.Error("zero width accepted")
		}
		if err := r.Resize(&dst, &Image{}, 3, 3); err == nil {
			t.Error("empty source accepted")
		}
	})
	t.Run("halve", func(t *testing.T) {
		// a 2:1 reduction with the antialiased triangle filter averages
		// neighbouring pixels: a 0/200 stripe pattern becomes ≈100.
		src := &Image{}
		src.Reset(64, 4, 1)
		for i := range src.Pix {
			if i%2 == 1 {
				src.Pix[i] = 200
			}
		}
		var dst Image
		if err := r.Resize(&dst, src, 32, 4); err != nil {
			t.Fatal(err)
		}
		for x := 1; x < 31; x++ {
			if v := dst.Pix[x]; v < 95 || v > 105 {
				t.Fatalf("column %d = %d, want ≈100 (antialiasing)", x, v)
			}
		}
	})
}

func TestToTensor(t *testing.T) {
	src := seq(4, 3, 3)
	var tt tensor.Tensor
	if err := ToTensor(&tt, src, tensor.HWC, nil); err != nil {
		t.Fatal(err)
	}
	if tt.DType != tensor.Uint8 || len(tt.Shape) != 3 || tt.Shape[0] != 3 || tt.Shape[2] != 3 || string(tt.U8) != string(src.Pix) {
		t.Fatalf("HWC uint8: %v %v", tt.DType, tt.Shape)
	}
	if err := ToTensor(&tt, src, tensor.CHW, nil); err != nil {
		t.Fatal(err)
	}
	if tt.Shape[0] != 3 || tt.Shape[1] != 3 || tt.Shape[2] != 4 || tt.Len() != 36 {
		t.Fatalf("CHW shape %v", tt.Shape)
	}
	for c := 0; c < 3; c++ {
		for y := 0; y < 3; y++ {
			for x := 0; x < 4; x++ {
				if tt.U8[c*12+y*4+x] != at(src, x, y, c) {
					t.Fatalf("CHW element (%d,%d,%d) wrong", c, y, x)
				}
			}
		}
	}
	norm := ImageNet()
	for _, l := range []tensor.Layout{tensor.HWC, tensor.CHW} {
		if err := ToTensor(&tt, src, l, norm); err != nil {
			t.Fatal(err)
		}
		mean := []float64{0.485, 0.456, 0.406}
		std := []float64{0.229, 0.224, 0.225}
		for c := 0; c < 3; c++ {
			for y := 0; y < 3; y++ {
				for x := 0; x < 4; x++ {
					i := (y*4+x)*3 + c
					if l == tensor.CHW {
						i = c*12 + y*4 + x
					}
					want := (float64(at(src, x, y, c))/255 - mean[c]) / std[c]
					if got := float64(tt.F32[i]); math.Abs(got-want) > 1e-5 {
						t.Fatalf("%v (%d,%d,%d) = %v, want %v", l, c, y, x, got, want)
					}
				}
			}
		}
	}
	if _, err := NewNormalizer([]float32{0.5}, []float32{0}); err == nil {
		t.Error("zero std accepted")
	}
	if err := ToTensor(&tt, seq(2, 2, 1), tensor.CHW, norm); err == nil {
		t.Error("3-channel normalizer on a 1-channel image accepted")
	}
}

func TestTransformValidate(t *testing.T) {
	bad := []Transform{
		{Resize: -1},
		{CenterCrop: 5, RandomCrop: 5},
		{FlipProb: 1.5},
		{Layout: tensor.Layout(9)},
	}
	for _, tr := range bad {
		if tr.Validate() == nil {
			t.Errorf("%+v accepted", tr)
		}
	}
	if err := (Transform{Resize: 256, CenterCrop: 224, FlipProb: 0.5, Layout: tensor.CHW}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestProcessorFlipAndSeed: the random crop and flip of a sample follow
// (seed, index): the same twice, varied across indices, another sequence
// under another seed.
func TestProcessorFlipAndSeed(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	data := encodePNG(t, synthRGB(40, 30, 1, 0))
	run := func(seed uint64) []string {
		p, err := NewProcessor(d, Transform{RandomCrop: 20, FlipProb: 0.5, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		var tt tensor.Tensor
		for i := range int64(20) {
			if err := p.Process(&tt, Encoded{Data: data, Key: "p.png", Index: i}); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(tt.U8))
		}
		return out
	}
	a, b, c := run(5), run(5), run(6)
	distinct, same := map[string]bool{}, 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed gave different outputs")
		}
		distinct[a[i]] = true
		if a[i] == c[i] {
			same++
		}
	}
	if len(distinct) < 5 {
		t.Errorf("only %d distinct random crops/flips in 20 draws", len(distinct))
	}
	if same > 3 {
		t.Errorf("seeds 5 and 6 agree on %d of 20 samples", same)
	}
}

// TestResizeWindow checks that a window of a resize is byte-identical to the
// full resize followed by a crop, for random sizes and windows.
func TestResizeWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var r Resizer
	for i := 0; i < 60; i++ {
		c := []int{1, 3, 4}[i%3]
		sw, sh := 1+rng.IntN(90), 1+rng.IntN(90)
		src := &Image{}
		src.Reset(sw, sh, c)
		for j := range src.Pix {
			src.Pix[j] = uint8(rng.IntN(256))
		}
		w, h := 1+rng.IntN(120), 1+rng.IntN(120)
		switch i % 5 {
		case 0:
			w = sw // no horizontal pass
		case 1:
			h = sh // no vertical pass
		}
		cw, ch := 1+rng.IntN(w), 1+rng.IntN(h)
		x0, y0 := rng.IntN(w-cw+1), rng.IntN(h-ch+1)
		var full, want, got Image
		if err := r.Resize(&full, src, w, h); err != nil {
			t.Fatal(err)
		}
		if err := Crop(&want, &full, x0, y0, cw, ch); err != nil {
			t.Fatal(err)
		}
		if err := r.ResizeWindow(&got, src, w, h, x0, y0, cw, ch); err != nil {
			t.Fatal(err)
		}
		if got.W != cw || got.H != ch || string(got.Pix) != string(want.Pix) {
			t.Fatalf("case %d: %d×%d×%d → %d×%d window %d×%d at (%d,%d) differs from resize+crop", i, sw, sh, c, w, h, cw, ch, x0, y0)
		}
	}
	var dst Image
	if err := r.ResizeWindow(&dst, seq(10, 10, 3), 5, 5, 3, 0, 3, 5); err == nil {
		t.Error("window outside the result accepted")
	}
}

// The flip fused into the tensor's write gives exactly what mirroring the image and
// then writing it gives, for every layout, channel count, dtype and odd or even width.
func TestToTensorFusedFlip(t *testing.T) {
	for _, tc := range []struct {
		w, h, c int
		layout  tensor.Layout
		norm    bool
	}{
		{7, 3, 3, tensor.CHW, false},
		{8, 5, 3, tensor.CHW, true},
		{1, 2, 3, tensor.CHW, true},
		{6, 4, 3, tensor.HWC, false},
		{5, 3, 1, tensor.CHW, false},
		{5, 3, 3, tensor.HWC, true},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d_%v_norm%v", tc.w, tc.h, tc.c, tc.layout, tc.norm), func(t *testing.T) {
			m := Image{W: tc.w, H: tc.h, C: tc.c, Pix: make([]byte, tc.w*tc.h*tc.c)}
			for i := range m.Pix {
				m.Pix[i] = byte(i*37 + 11)
			}
			var norm *Normalizer
			if tc.norm {
				norm = ImageNet()
				if tc.c != 3 {
					t.Skip("ImageNet has 3 channels")
				}
			}
			ref := Image{W: m.W, H: m.H, C: m.C, Pix: append([]byte(nil), m.Pix...)}
			HFlip(&ref)
			var want, got tensor.Tensor
			if err := ToTensor(&want, &ref, tc.layout, norm); err != nil {
				t.Fatal(err)
			}
			if err := toTensor(&got, &m, tc.layout, norm, true); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Shape, want.Shape) || !slices.Equal(got.U8, want.U8) || !slices.Equal(got.F32, want.F32) {
				t.Fatalf("fused flip: shape %v, want %v; tensors differ", got.Shape, want.Shape)
			}
			var plain tensor.Tensor
			if err := toTensor(&plain, &ref, tc.layout, norm, false); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain.U8, want.U8) || !slices.Equal(plain.F32, want.F32) {
				t.Fatal("toTensor without flip differs from ToTensor")
			}
		})
	}
}
