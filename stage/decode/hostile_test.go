package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/tensor"
)

// pngChunk appends one chunk with its CRC.
func pngChunk(b *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	b.Write(n[:])
	b.WriteString(typ)
	b.Write(data)
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	b.Write(n[:])
}

// bombPNG is a w×h 8-bit grayscale PNG. When rows is true its IDAT holds
// every (all-zero) row: a real decompression bomb; else only a few bytes of
// IDAT follow the header.
func bombPNG(t testing.TB, w, h uint32, rows bool) []byte {
	t.Helper()
	var b bytes.Buffer
	b.Write(pngMagic)
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 0 // depth 8, grayscale
	pngChunk(&b, "IHDR", ihdr)
	n := int64(64)
	if rows {
		n = int64(h) * (int64(w) + 1) // a filter byte and w pixels per row
	}
	pngChunk(&b, "IDAT", zlibZeros(n))
	pngChunk(&b, "IEND", nil)
	return b.Bytes()
}

// zlibZeros is a zlib stream of n zero bytes, written directly (compress/flate
// takes minutes for 400 MB under the race detector): one fixed-Huffman block
// of a literal 0, then matches of 258 bytes at distance 1 (13 bits each), then
// literals. 20000×20000 comes to about 2.5 MB; zlib -9 makes it 389 KB.
func zlibZeros(n int64) []byte {
	out := []byte{0x78, 0x01}
	var acc uint64
	var nb uint
	put := func(v uint64, bits uint) { // LSB first
		acc |= v << nb
		nb += bits
		for nb >= 8 {
			out = append(out, byte(acc))
			acc >>= 8
			nb -= 8
		}
	}
	huff := func(code uint64, bits uint) { // Huffman codes go MSB first
		var r uint64
		for i := uint(0); i < bits; i++ {
			r = r<<1 | (code>>i)&1
		}
		put(r, bits)
	}
	put(1, 1) // BFINAL
	put(1, 2) // fixed Huffman
	huff(0x30, 8)
	rest := n - 1
	for ; rest >= 258; rest -= 258 {
		huff(0xC5, 8) // length 258 (code 285)
		huff(0, 5)    // distance 1
	}
	for ; rest > 0; rest-- {
		huff(0x30, 8)
	}
	huff(0, 7) // end of block
	if nb > 0 {
		out = append(out, byte(acc))
	}
	adler := uint32(n%65521)<<16 | 1
	return binary.BigEndian.AppendUint32(out, adler)
}

// withSOFSize returns a copy of a JPEG whose frame header claims w×h.
func withSOFSize(t testing.TB, data []byte, w, h int) []byte {
	t.Helper()
	out := append([]byte(nil), data...)
	for _, sof := range []string{"\xff\xc0", "\xff\xc2"} {
		if i := strings.Index(string(out), sof); i > 0 {
			binary.BigEndian.PutUint16(out[i+5:], uint16(h))
			binary.BigEndian.PutUint16(out[i+7:], uint16(w))
			return out
		}
	}
	t.Fatal("no SOF0/SOF2 in the test JPEG")
	return nil
}

func readTestdata(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("Go distribution test image: %v", err)
	}
	return data
}

func progressiveJPEG(t testing.TB) []byte {
	return readTestdata(t, goTestdata(t, "video-001.progressive.jpeg"))
}

func cmykJPEG(t testing.TB) []byte { return readTestdata(t, goTestdata(t, "video-001.cmyk.jpeg")) }

func interlacedPNG(t testing.TB) []byte {
	return readTestdata(t, filepath.Join(goRoot(t), "src", "image", "png", "testdata", "gray-gradient.interlaced.png"))
}

func TestInspect(t *testing.T) {
	jpg := encodeJPEG(t, synthRGB(120, 80, 1, 3), 85)
	gray := encodePNG(t, image.NewGray(image.Rect(0, 0, 33, 21)))
	rgba16 := image.NewNRGBA64(image.Rect(0, 0, 10, 7))
	rgba16.Set(1, 1, color.NRGBA64{1, 2, 3, 4})
	png16 := encodePNG(t, rgba16)
	for _, b := range []Backend{BackendAuto, BackendStd} {
		d := newDecoder(t, b)
		cases := []struct {
			name       string
			data       []byte
			w, h, comp int
			format     string
			prog       bool
		}{
			{"jpeg", jpg, 120, 80, 3, "jpeg", false},
			{"progressive", progressiveJPEG(t), 150, 103, 3, "jpeg", true},
			{"cmyk", cmykJPEG(t), 150, 103, 4, "jpeg", false},
			{"interlaced png", interlacedPNG(t), 1, 16, 1, "png", true},
			{"gray png", gray, 33, 21, 1, "png", false},
			{"png 16-bit", png16, 10, 7, 4, "png", false},
		}
		for _, c := range cases {
			in, err := d.Inspect(c.data, c.name, 0)
			if err != nil {
				t.Fatalf("%s/%s: %v", b, c.name, err)
			}
			if in.Format != c.format || in.Width != c.w || in.Height != c.h || in.Components != c.comp || in.Progressive != c.prog {
				t.Errorf("%s/%s: %+v", b, c.name, in)
			}
			if in.DecodeBytes < int64(c.w*c.h*3) {
				t.Errorf("%s/%s: DecodeBytes %d below the RGB result", b, c.name, in.DecodeBytes)
			}
			var m Image
			if err := d.Decode(&m, c.data, c.name, 0); err != nil {
				t.Fatalf("%s/%s: %v", b, c.name, err)
			}
			if m.W != in.DecodedW || m.H != in.DecodedH || int64(len(m.Pix)) > in.DecodeBytes {
				t.Errorf("%s/%s: decoded %d×%d (%d bytes), Inspect said %d×%d within %d bytes", b, c.name, m.W, m.H, len(m.Pix), in.DecodedW, in.DecodedH, in.DecodeBytes)
			}
		}
	}
}

// TestDecompressionBombs feeds the bombs to both backends: each is
// refused from its header, with an error naming the file and the sizes,
// before the decoder allocates.
func TestDecompressionBombs(t *testing.T) {
	small := encodeJPEG(t, synthRGB(64, 48, 1, 5), 90)
	realBomb := bombPNG(t, 20000, 20000, true)
	// the generator makes valid PNGs: a small one decodes
	m, err := png.Decode(bytes.NewReader(bombPNG(t, 300, 200, true)))
	if err != nil || m.Bounds().Dx() != 300 || m.Bounds().Dy() != 200 {
		t.Fatalf("generated 300×200 PNG: %v", err)
	}
	cases := []struct {
		name string
		data []byte
		w, h int64
	}{
		{"gray-20000.png", realBomb, 20000, 20000},
		{"claims-100000.png", bombPNG(t, 100000, 100000, false), 100000, 100000},
		{"claims-2^31-1.png", bombPNG(t, 1<<31-1, 1<<31-1, false), 1<<31 - 1, 1<<31 - 1},
		{"jpeg-20000.jpg", withSOFSize(t, small, 20000, 20000), 20000, 20000},
		{"jpeg-65535.jpg", withSOFSize(t, small, 65535, 65535), 65535, 65535},
	}
	for _, b := range []Backend{BackendAuto, BackendStd} {
		d := newDecoder(t, b)
		for _, c := range cases {
			var m Image
			name := "/data/bombs/" + c.name
			err := d.Decode(&m, c.data, name, 0)
			var le *LimitError
			if !errors.As(err, &le) || le.W != c.w || le.H != c.h || le.Limit != DefaultMaxPixels {
				t.Fatalf("%s/%s: Decode = %v, want a LimitError for %d×%d", b, c.name, err, c.w, c.h)
			}
			if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "89478485") {
				t.Errorf("%s: error %q does not name the file and the limit", c.name, err)
			}
			if cap(m.Pix) != 0 {
				t.Errorf("%s: %d bytes allocated for a refused image", c.name, cap(m.Pix))
			}
		}
	}
	// a header over 2³¹-1 is impossible in PNG and refused even without a limit
	d := newDecoder(t, BackendStd, func(o *Options) { o.MaxPixels = -1 })
	huge := bombPNG(t, 1<<31, 1, false)
	if _, err := d.Inspect(huge, "huge.png", 0); err == nil || !strings.Contains(err.Error(), "2³¹-1") {
		t.Errorf("a 2³¹-wide PNG: %v", err)
	}
}

func TestPixelLimitOption(t *testing.T) {
	data := encodePNG(t, synthRGB(100, 50, 1, 0))
	for _, c := range []struct {
		limit int64
		ok    bool
	}{{5000, true}, {4999, false}, {-1, true}, {0, true}} {
		d := newDecoder(t, BackendStd, func(o *Options) { o.MaxPixels = c.limit })
		var m Image
		err := d.Decode(&m, data, "x.png", 0)
		if (err == nil) != c.ok {
			t.Errorf("limit %d: %v", c.limit, err)
		}
	}
}

// TestTransformLimits: sizes the user passes are checked against the pixel
// limit when the stage is built; a resize that an extreme aspect ratio turns
// into a bomb is refused per image.
func TestTransformLimits(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	for _, tr := range []Transform{{CenterCrop: 100000}, {RandomCrop: 10000}, {Resize: 100000, CenterCrop: 224}} {
		if _, err := NewStage("decode", d, StageConfig{Workers: 1, Transform: tr}, getItem); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
			t.Errorf("%+v: NewStage = %v", tr, err)
		}
		if _, err := NewProcessor(d, tr); err == nil {
			t.Errorf("%+v: NewProcessor accepted it", tr)
		}
	}
	// 1×60000 is 60000 pixels; Resize(256) would make it 256×15360000
	thin := encodePNG(t, image.NewGray(image.Rect(0, 0, 1, 60000)))
	p, err := NewProcessor(d, Transform{Resize: 256, CenterCrop: 224})
	if err != nil {
		t.Fatal(err)
	}
	var out tensor.Tensor
	err = p.Process(&out, Encoded{Data: thin, Key: "thin.png"})
	var le *LimitError
	if !errors.As(err, &le) || le.What != "resize result" || !strings.Contains(err.Error(), "thin.png") {
		t.Fatalf("thin image: %v", err)
	}
}

// TestHostileImages: every hostile input ends in an error naming the file
// or in a correct image, on both backends; none panics.
func TestHostileImages(t *testing.T) {
	good := encodeJPEG(t, synthRGB(64, 48, 1, 5), 90)
	goodPNG := encodePNG(t, synthRGB(40, 30, 2, 0))
	cases := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"zero-size.jpg", []byte{}, false},
		{"garbage.jpg", bytes.Repeat([]byte{0xFF}, 300), false},
		{"soi-then-ff.jpg", append([]byte{0xFF, 0xD8}, bytes.Repeat([]byte{0xFF}, 50)...), false},
		{"truncated-in-header.jpg", good[:40], false},
		{"truncated-in-scan.jpg", good[:len(good)-200], false},
		{"truncated.png", goodPNG[:len(goodPNG)-30], false},
		{"ihdr-only.png", goodPNG[:33], false},
		{"zero-width.png", bombPNG(t, 0, 10, false), false},
		{"png-named.jpg", goodPNG, true},
		{"jpeg-named.png", good, true},
		{"cmyk.jpg", cmykJPEG(t), true},
		{"segment-length-past-end.jpg", append([]byte{0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xFF}, make([]byte, 10)...), false},
		{"segment-length-1.jpg", []byte{0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01, 0, 0}, false},
		{"sof-bad-sampling.jpg", []byte{0xFF, 0xD8, 0xFF, 0xC0, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x00, 0, 0xFF, 0xD9}, false},
	}
	for _, b := range []Backend{BackendAuto, BackendStd} {
		d := newDecoder(t, b)
		for _, c := range cases {
			var m Image
			err := d.Decode(&m, c.data, "/data/"+c.name, 0)
			if c.ok {
				if err != nil || m.W == 0 {
					t.Errorf("%s/%s: %v", b, c.name, err)
				}
				continue
			}
			var de *Error
			if !errors.As(err, &de) || de.Name != "/data/"+c.name {
				t.Errorf("%s/%s: Decode = %v, want an *Error naming the file", b, c.name, err)
			}
		}
	}
}

// BenchmarkInspect is the cost of reading a header before every decode.
func BenchmarkInspect(b *testing.B) {
	d := newDecoder(b, BackendAuto)
	for _, c := range []struct {
		name string
		data []byte
	}{{"jpeg-500x375", encodeJPEG(b, synthRGB(500, 375, 1, 6), 85)}, {"png-200x150", encodePNG(b, synthRGB(200, 150, 1, 0))}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := d.Inspect(c.data, "x", 256); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
