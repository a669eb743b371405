package decode

import (
	"bytes"
	"errors"
	"testing"

	"github.com/psiflow/psiflow/tensor"
)

// fuzzMaxPixels bounds what a fuzzed input may make the decoders allocate.
const fuzzMaxPixels = 1 << 20

// fuzzSeeds are the inputs every fuzz target starts from; they also run in
// the normal test run.
func fuzzSeeds(f *testing.F) [][]byte {
	good := encodeJPEG(f, synthRGB(24, 16, 1, 3), 80)
	goodPNG := encodePNG(f, synthRGB(12, 9, 2, 0))
	seeds := [][]byte{
		good, goodPNG,
		good[:len(good)/2], goodPNG[:40],
		withSOFSize(f, good, 20000, 20000),
		bombPNG(f, 100000, 100000, false),
		bombPNG(f, 50, 40, true),
		{0xFF, 0xD8, 0xFF}, {0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xFF},
		[]byte("\x89PNG\r\n\x1a\n"), nil,
	}
	for _, name := range []string{"video-001.progressive.jpeg", "video-001.cmyk.jpeg", "video-005.gray.q50.jpeg", "video-001.q50.410.progressive.jpeg"} {
		seeds = append(seeds, readTestdata(f, goTestdata(f, name)))
	}
	for _, s := range seeds {
		f.Add(s)
	}
	return seeds
}

func fuzzDecoders(f *testing.F) []*Decoder {
	ds := []*Decoder{newDecoder(f, BackendStd, func(o *Options) { o.MaxPixels = fuzzMaxPixels })}
	if d, err := NewDecoder(Options{Backend: BackendTurbo, MaxPixels: fuzzMaxPixels}); err == nil {
		f.Cleanup(func() { d.Close() })
		ds = append(ds, d)
	}
	return ds
}

// checkInfo checks what Inspect says about data against the header parsers.
func checkInfo(t *testing.T, d *Decoder, data []byte) (Info, bool) {
	in, err := d.Inspect(data, "fuzz", 0)
	if err != nil {
		var de *Error
		if !errors.As(err, &de) || de.Name != "fuzz" {
			t.Fatalf("Inspect error %v is not an *Error naming the input", err)
		}
		return Info{}, false
	}
	if in.Width <= 0 || in.Height <= 0 || in.Pixels() > fuzzMaxPixels || in.DecodedW <= 0 || in.DecodedH <= 0 {
		t.Fatalf("Inspect accepted %+v", in)
	}
	if in.DecodeBytes < int64(in.DecodedW)*int64(in.DecodedH)*3 {
		t.Fatalf("DecodeBytes %d below the RGB result of %d×%d", in.DecodeBytes, in.DecodedW, in.DecodedH)
	}
	return in, true
}

// FuzzJPEGHeader: the JPEG header parser never panics, never trusts a
// length, and agrees with Inspect; nothing is decoded.
func FuzzJPEGHeader(f *testing.F) {
	fuzzSeeds(f)
	ds := fuzzDecoders(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseJPEGHeader(data)
		if err == nil && (h.w <= 0 || h.h <= 0 || h.comps < 1 || h.comps > 4 || h.hmax < 1 || h.vmax < 1) {
			t.Fatalf("parsed %+v", h)
		}
		for _, d := range ds {
			if in, ok := checkInfo(t, d, data); ok && in.Format == "jpeg" && (err != nil || in.Width != h.w || in.Height != h.h) {
				t.Fatalf("Inspect %+v, parser %+v, %v", in, h, err)
			}
		}
	})
}

// FuzzPNGHeader: the PNG header parser never panics and agrees with Inspect.
func FuzzPNGHeader(f *testing.F) {
	fuzzSeeds(f)
	ds := fuzzDecoders(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parsePNGHeader(data)
		if err == nil && (h.w <= 0 || h.h <= 0 || h.bytesPerPixel() < 1 || h.channels() < 1) {
			t.Fatalf("parsed %+v", h)
		}
		for _, d := range ds {
			if in, ok := checkInfo(t, d, data); ok && in.Format == "png" && (err != nil || in.Width != h.w || in.Height != h.h) {
				t.Fatalf("Inspect %+v, parser %+v, %v", in, h, err)
			}
		}
	})
}

// FuzzDecode decodes small inputs whole, with both backends, directly and
// through a Processor (Resize + CenterCrop, and RandomResizedCrop + flip,
// to a tensor): no panic, errors name
// the input, a decoded image has the size Inspect predicted, within the
// bytes it predicted, and nothing over the pixel limit is decoded.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	ds := fuzzDecoders(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		for _, d := range ds {
			in, ok := checkInfo(t, d, data)
			var m Image
			err := d.Decode(&m, data, "fuzz", 0)
			var de *Error
			switch {
			case err != nil && (!errors.As(err, &de) || de.Name != "fuzz"):
				t.Fatalf("%s: Decode error %v is not an *Error naming the input", d.Backend(), err)
			case err == nil && !ok:
				t.Fatalf("%s: Decode succeeded where Inspect failed", d.Backend())
			case err == nil && (m.W != in.DecodedW || m.H != in.DecodedH || int64(len(m.Pix)) > in.DecodeBytes):
				t.Fatalf("%s: decoded %d×%d in %d bytes, Inspect said %d×%d within %d", d.Backend(), m.W, m.H, len(m.Pix), in.DecodedW, in.DecodedH, in.DecodeBytes)
			}
			for _, tr := range []Transform{
				{Resize: 20, CenterCrop: 16, Layout: tensor.CHW},
				{RandomResizedCrop: ResizedCrop{Size: 16}, FlipProb: 0.5, Seed: 1, Layout: tensor.CHW},
			} {
				p, err := NewProcessor(d, tr)
				if err != nil {
					t.Fatal(err)
				}
				var out tensor.Tensor
				e := Encoded{Data: data, Key: "fuzz", Index: int64(len(data))}
				plan, perr := p.Plan(e)
				if err := p.Process(&out, e); err == nil {
					if perr != nil || len(out.U8) != 3*16*16 || plan.OutW != 16 || plan.OutH != 16 {
						t.Fatalf("%s: processed into %v (plan %+v, %v)", d.Backend(), out.Shape, plan, perr)
					}
				} else if !bytes.Contains([]byte(err.Error()), []byte("fuzz")) {
					t.Fatalf("%s: Process error %v does not name the input", d.Backend(), err)
				}
			}
		}
	})
}
