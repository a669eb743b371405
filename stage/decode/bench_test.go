package decode

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/psiflow/psiflow/stage/decode/turbojpeg"
	"github.com/psiflow/psiflow/tensor"
)

// benchJPEG is an ImageNet-like 500×375 q85 JPEG (≈100 KiB: noisy, so
// Huffman decoding costs what it costs on photos).
var benchJPEG = sync.OnceValue(func() []byte {
	return encodeJPEG(&testing.B{}, synthRGB(500, 375, 1, 24), 85)
})

func reportRate(b *testing.B, cm *cpuMeter) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
	cm.report(b)
}

// BenchmarkDecode is the per-core decode rate of one 500×375 JPEG from
// memory into a reused buffer.
func BenchmarkDecode(b *testing.B) {
	data := benchJPEG()
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"turbojpeg", Options{Backend: BackendTurbo}},
		{"turbojpeg-fastdct", Options{Backend: BackendTurbo, FastDCT: true}},
		{"stdlib", Options{Backend: BackendStd}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, err := NewDecoder(c.opts)
			if err != nil {
				b.Skip(err)
			}
			defer d.Close()
			var m Image
			_ = d.Decode(&m, data, "bench.jpg", 0) // warm-up: buffers sized before the timed loop
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cm := startCPU(b)
			for b.Loop() {
				if err := d.Decode(&m, data, "bench.jpg", 0); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, cm)
		})
	}
}

// BenchmarkDecodeScaled decodes a 1000×750 JPEG for a 128-pixel target:
// DCT scaling picks 1/2 (375 ≥ 2 × 128… 1/4 gives 188 < 256).
func BenchmarkDecodeScaled(b *testing.B) {
	data := encodeJPEG(b, synthRGB(1000, 750, 2, 24), 85)
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"full", Options{Backend: BackendTurbo, NoDCTScaling: true}},
		{"scaled", Options{Backend: BackendTurbo}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, err := NewDecoder(c.opts)
			if err != nil {
				b.Skip(err)
			}
			defer d.Close()
			var m Image
			_ = d.Decode(&m, data, "bench.jpg", 128) // warm-up
			b.ReportAllocs()
			cm := startCPU(b)
			for b.Loop() {
				if err := d.Decode(&m, data, "bench.jpg", 128); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, cm)
		})
	}
}

func benchImage(b *testing.B) *Image {
	d, err := NewDecoder(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var m Image
	if err := d.Decode(&m, benchJPEG(), "bench.jpg", 0); err != nil {
		b.Fatal(err)
	}
	return &m
}

// BenchmarkResize is Resize(256) of a 500×375 RGB image (to 341×256).
func BenchmarkResize(b *testing.B) {
	src := benchImage(b)
	var r Resizer
	var dst Image
	_ = r.ResizeShorter(&dst, src, 256) // warm-up: scratch and taps
	b.ReportAllocs()
	cm := startCPU(b)
	for b.Loop() {
		if err := r.ResizeShorter(&dst, src, 256); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, cm)
}

// BenchmarkCenterCrop is CenterCrop(224) of a 341×256 image.
func BenchmarkCenterCrop(b *testing.B) {
	src := benchImage(b)
	var r Resizer
	var mid, dst Image
	if err := r.ResizeShorter(&mid, src, 256); err != nil {
		b.Fatal(err)
	}
	_ = CenterCrop(&dst, &mid, 224, 224) // warm-up
	b.ReportAllocs()
	cm := startCPU(b)
	for b.Loop() {
		if err := CenterCrop(&dst, &mid, 224, 224); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, cm)
}

// BenchmarkToTensor converts a 224×224 crop to CHW, as uint8 and normalised float32.
func BenchmarkToTensor(b *testing.B) {
	src := seq(224, 224, 3)
	for _, c := range []struct {
		name string
		norm *Normalizer
	}{{"uint8", nil}, {"float32", ImageNet()}} {
		b.Run(c.name, func(b *testing.B) {
			var tt tensor.Tensor
			_ = ToTensor(&tt, src, tensor.CHW, c.norm) // warm-up
			b.ReportAllocs()
			cm := startCPU(b)
			for b.Loop() {
				if err := ToTensor(&tt, src, tensor.CHW, c.norm); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, cm)
		})
	}
}

// BenchmarkToTensorFlip is the flipped float32 tensor of a 224×224 image: mirrored
// in place and then written (how Process did it) against the mirror read while
// writing (how it does it now).
func BenchmarkToTensorFlip(b *testing.B) {
	norm := ImageNet()
	for _, c := range []struct {
		name  string
		write func(*tensor.Tensor, *Image) error
	}{
		{"hflip-then-write", func(t *tensor.Tensor, m *Image) error { HFlip(m); return ToTensor(t, m, tensor.CHW, norm) }},
		{"fused", func(t *tensor.Tensor, m *Image) error { return toTensor(t, m, tensor.CHW, norm, true) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			src := seq(224, 224, 3)
			var tt tensor.Tensor
			_ = c.write(&tt, src)
			cm := startCPU(b)
			for b.Loop() {
				if err := c.write(&tt, src); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, cm)
		})
	}
}

// BenchmarkTransform is Resize(256) + CenterCrop(224) + flip + CHW uint8 on
// an already decoded 500×375 image: the transform cost alone.
func BenchmarkTransform(b *testing.B) {
	src := benchImage(b)
	var r Resizer
	var mid, crop Image
	var tt tensor.Tensor
	step := func() error {
		if err := r.ResizeShorter(&mid, src, 256); err != nil {
			return err
		}
		if err := CenterCrop(&crop, &mid, 224, 224); err != nil {
			return err
		}
		HFlip(&crop)
		return ToTensor(&tt, &crop, tensor.CHW, nil)
	}
	_ = step() // warm-up
	b.ReportAllocs()
	cm := startCPU(b)
	for b.Loop() {
		if err := r.ResizeShorter(&mid, src, 256); err != nil {
			b.Fatal(err)
		}
		if err := CenterCrop(&crop, &mid, 224, 224); err != nil {
			b.Fatal(err)
		}
		HFlip(&crop)
		if err := ToTensor(&tt, &crop, tensor.CHW, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, cm)
}

// BenchmarkProcess is the whole per-image work of the decode stage, per
// core: decode + Resize(256) + CenterCrop(224) + CHW uint8 (the validation
// transform), and on a 1024×768 image also RandomResizedCrop(224) + flip
// (the training transform), each with reduced-size decoding (the default)
// and Exact, and the training transform with every image decoded whole
// (Options.NoCropDecoding) against the default, which decodes only the
// box's part. "limit-images/s" is the per-CPU-second rate times the CPUs.
func BenchmarkProcess(b *testing.B) {
	data := benchJPEG()
	large := encodeJPEG(b, synthRGB(1024, 768, 2, 24), 85)
	val := Transform{Resize: 256, CenterCrop: 224, Layout: tensor.CHW}
	exact := val
	exact.Exact = true
	train := Transform{RandomResizedCrop: ResizedCrop{Size: 224}, FlipProb: 0.5, Layout: tensor.CHW, Seed: 1}
	trainExact := train
	trainExact.Exact = true
	for _, c := range []struct {
		name string
		opts Options
		tr   Transform
		data []byte
	}{
		{"turbojpeg", Options{Backend: BackendTurbo}, val, data},
		{"stdlib", Options{Backend: BackendStd}, val, data},
		{"turbojpeg/1024x768/val", Options{Backend: BackendTurbo}, val, large},
		{"turbojpeg/1024x768/val-exact", Options{Backend: BackendTurbo}, exact, large},
		{"turbojpeg/1024x768/train", Options{Backend: BackendTurbo}, train, large},
		{"turbojpeg/1024x768/train-exact", Options{Backend: BackendTurbo}, trainExact, large},
		// crop decoding (the default) against decoding every image whole
		{"turbojpeg/1024x768/train-whole", Options{Backend: BackendTurbo, NoCropDecoding: true}, train, large},
		{"turbojpeg/500x375/train", Options{Backend: BackendTurbo}, train, data},
		{"turbojpeg/500x375/train-whole", Options{Backend: BackendTurbo, NoCropDecoding: true}, train, data},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, err := NewDecoder(c.opts)
			if err != nil {
				b.Skip(err)
			}
			defer d.Close()
			p, err := NewProcessor(d, c.tr)
			if err != nil {
				b.Fatal(err)
			}
			var tt tensor.Tensor
			var index int64 // another sample each time: the train boxes vary
			for range 20 {  // warm-up
				_ = p.Process(&tt, Encoded{Data: c.data, Key: "bench.jpg", Index: index})
				index++
			}
			b.ReportAllocs()
			cm := startCPU(b)
			for b.Loop() {
				if err := p.Process(&tt, Encoded{Data: c.data, Key: "bench.jpg", Index: index}); err != nil {
					b.Fatal(err)
				}
				index++
			}
			reportRate(b, cm)
			// the CPU-bound limit of this transform on this host
			cm.reportLimit(b)
		})
	}
}

// BenchmarkResizeCropFused is Resize(256) + CenterCrop(224) computed as one
// window (what Processor does): only the kept pixels are resampled.
func BenchmarkResizeCropFused(b *testing.B) {
	src := benchImage(b)
	var r Resizer
	var dst Image
	w, h := ShorterSide(src.W, src.H, 256)
	x0, y0 := CenterOffset(w, h, 224, 224)
	_ = r.ResizeWindow(&dst, src, w, h, x0, y0, 224, 224) // warm-up
	b.ReportAllocs()
	cm := startCPU(b)
	for b.Loop() {
		if err := r.ResizeWindow(&dst, src, w, h, x0, y0, 224, 224); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, cm)
}

// BenchmarkCropAware measures crop-aware decoding by TurboJPEG's lossless
// crop (tjTransform with TJXOPT_CROP on the MCU grid, then a decode of the
// smaller JPEG) against the full decode followed by a copy of the box, for
// central boxes of a share of the image's area: what docs/DECODE.md's
// choice rests on.
func BenchmarkCropAware(b *testing.B) {
	lib, err := turbojpeg.Default()
	if err != nil {
		b.Skip(err)
	}
	for _, sz := range [][2]int{{500, 375}, {1024, 768}} {
		data := encodeJPEG(b, synthRGB(sz[0], sz[1], 4, 24), 85)
		for _, share := range []float64{1, 0.54, 0.25, 0.08} {
			bw, bh := int(float64(sz[0])*math.Sqrt(share)), int(float64(sz[1])*math.Sqrt(share))
			bx, by := (sz[0]-bw)/2, (sz[1]-bh)/2
			for _, way := range []string{"full", "lossless"} {
				b.Run(fmt.Sprintf("%dx%d/area=%.2f/%s", sz[0], sz[1], share, way), func(b *testing.B) {
					d, err := lib.NewDecompressor()
					if err != nil {
						b.Fatal(err)
					}
					defer d.Close()
					tr, err := lib.NewTransformer()
					if err != nil {
						b.Fatal(err)
					}
					defer tr.Close()
					hdr, err := d.Header(data)
					if err != nil {
						b.Fatal(err)
					}
					mw, mh, _ := turbojpeg.MCUSize(hdr.Subsampling)
					x0, y0 := bx/mw*mw, by/mh*mh
					cw, ch := bx+bw-x0, by+bh-y0
					pix := make([]byte, sz[0]*sz[1]*3)
					buf := make([]byte, tr.CropBufSize(cw, ch, hdr.Subsampling))
					var full, box Image
					step := func() error {
						if way == "full" {
							full.Reset(sz[0], sz[1], 3)
							if err := d.Decompress(data, hdr, turbojpeg.ScalingFactor{Num: 1, Denom: 1}, turbojpeg.PixelRGB, 0, full.Pix); err != nil {
								return err
							}
							return Crop(&box, &full, bx, by, bw, bh)
						}
						n, err := tr.Crop(buf, data, x0, y0, cw, ch, hdr.Subsampling)
						if err != nil {
							return err
						}
						h, err := d.Header(buf[:n])
						if err != nil {
							return err
						}
						return d.Decompress(buf[:n], h, turbojpeg.ScalingFactor{Num: 1, Denom: 1}, turbojpeg.PixelRGB, 0, pix)
					}
					if err := step(); err != nil {
						b.Fatal(err)
					}
					cm := startCPU(b)
					for b.Loop() {
						if err := step(); err != nil {
							b.Fatal(err)
						}
					}
					reportRate(b, cm)
				})
			}
		}
	}
}
