//go:build linux || darwin

package turbojpeg

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"runtime"
	"strings"
	"testing"
)

func lib(t *testing.T) *Lib {
	t.Helper()
	l, err := Default()
	if err != nil {
		t.Skipf("TurboJPEG not available here (install libturbojpeg0): %v", err)
	}
	return l
}

func sample(t *testing.T, w, h int) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.Set(x, y, color.RGBA{uint8(x * 3), uint8(y * 5), uint8(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, path, want string
	}{
		{"missing file", "/nonexistent/libturbojpeg.so.99", "libturbojpeg.so.99"},
		// a real library without the TurboJPEG symbols: purego's panic must become an error
		{"missing symbol", map[string]string{"linux": "libc.so.6", "darwin": "/usr/lib/libSystem.B.dylib"}[runtime.GOOS], "symbol tjInitDecompress"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.path)
			if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load(%q) = %v, want ErrNotAvailable mentioning %q", c.path, err, c.want)
			}
		})
	}
}

func TestDecompress(t *testing.T) {
	l := lib(t)
	if l.Name() == "" || !strings.Contains(l.Describe(), "TurboJPEG") {
		t.Errorf("Describe() = %q", l.Describe())
	}
	var half bool
	for _, f := range l.ScalingFactors() {
		if f == (ScalingFactor{1, 2}) {
			half = true
		}
	}
	if !half {
		t.Fatalf("scaling factors %v lack 1/2", l.ScalingFactors())
	}
	d, err := l.NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	data := sample(t, 61, 37)
	hdr, err := d.Header(data)
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Width != 61 || hdr.Height != 37 || hdr.Colorspace != ColorspaceYCbCr {
		t.Fatalf("header %+v", hdr)
	}
	cases := []struct {
		f    ScalingFactor
		pf   PixelFormat
		w, h int
	}{
		{ScalingFactor{1, 1}, PixelRGB, 61, 37},
		{ScalingFactor{1, 2}, PixelRGB, 31, 19},
		{ScalingFactor{1, 8}, PixelGray, 8, 5},
	}
	for _, c := range cases {
		if w, h := l.ScaledSize(61, 37, c.f); w != c.w || h != c.h {
			t.Errorf("ScaledSize(%v) = %d×%d, want %d×%d", c.f, w, h, c.w, c.h)
		}
		n := c.w * c.h * c.pf.Channels()
		buf := make([]byte, n+1)
		buf[n] = 0xAB
		if err := d.Decompress(data, hdr, c.f, c.pf, 0, buf); err != nil {
			t.Fatalf("%v: %v", c.f, err)
		}
		if buf[n] != 0xAB {
			t.Fatalf("%v: wrote past the scaled size", c.f)
		}
		if err := d.Decompress(data, hdr, c.f, c.pf, 0, buf[:n-1]); err == nil {
			t.Fatalf("%v: short buffer accepted", c.f)
		}
	}
	if err := d.Decompress(data, hdr, ScalingFactor{2, 3}, PixelRGB, 0, make([]byte, 61*37*3)); err == nil {
		t.Error("unsupported scaling factor accepted")
	}
	// truncated: an error, and the handle still works afterwards
	if err := d.Decompress(data[:len(data)*2/3], hdr, ScalingFactor{1, 1}, PixelRGB, 0, make([]byte, 61*37*3)); err == nil {
		t.Error("truncated data decoded without error")
	}
	if _, err := d.Header(data[:20]); err == nil {
		t.Error("truncated header parsed without error")
	}
	if _, err := d.Header(data); err != nil {
		t.Errorf("handle unusable after an error: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := d.Header(data); err == nil {
		t.Error("closed handle accepted work")
	}
}

func TestTablesOnlyHeaderRejected(t *testing.T) {
	l := lib(t)
	d, err := l.NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	data := sample(t, 16, 16)
	// keep SOI, DQT and DHT segments, drop SOF and scans: an abbreviated
	// table-specification stream, for which TurboJPEG reports 0×0.
	var out []byte
	out = append(out, 0xFF, 0xD8)
	for i := 2; i+4 <= len(data); {
		m := data[i+1]
		n := int(data[i+2])<<8 | int(data[i+3])
		if m == 0xDB || m == 0xC4 {
			out = append(out, data[i:i+2+n]...)
		}
		if m == 0xDA {
			break
		}
		i += 2 + n
	}
	out = append(out, 0xFF, 0xD9)
	if _, err := d.Header(out); err == nil {
		t.Fatal("tables-only stream accepted as an image")
	}
}

// TestLosslessCrop: a lossless crop decodes to the full decode's pixels in
// the region, except along the crop's edges (its first row and column, its
// last two), where chroma upsampling lacks the neighbouring samples (within
// a few levels).
func TestLosslessCrop(t *testing.T) {
	l := lib(t)
	tr, err := l.NewTransformer()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	d, err := l.NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	data := sample(t, 320, 240)
	hdr, err := d.Header(data)
	if err != nil {
		t.Fatal(err)
	}
	full := make([]byte, 320*240*3)
	if err := d.Decompress(data, hdr, ScalingFactor{1, 1}, PixelRGB, 0, full); err != nil {
		t.Fatal(err)
	}
	mw, mh, ok := MCUSize(hdr.Subsampling)
	if !ok {
		t.Fatalf("subsampling %d unknown", hdr.Subsampling)
	}
	x, y, w, h := 2*mw, mh, 101, 91
	dst := make([]byte, tr.CropBufSize(w, h, hdr.Subsampling))
	n, err := tr.Crop(dst, data, x, y, w, h, hdr.Subsampling)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := d.Header(dst[:n])
	if err != nil {
		t.Fatal(err)
	}
	if ch.Width != w || ch.Height != h {
		t.Fatalf("cropped JPEG is %d×%d, want %d×%d", ch.Width, ch.Height, w, h)
	}
	crop := make([]byte, w*h*3)
	if err := d.Decompress(dst[:n], ch, ScalingFactor{1, 1}, PixelRGB, 0, crop); err != nil {
		t.Fatal(err)
	}
	inner, edge := 0, 0
	for r := 0; r < h; r++ {
		for c := 0; c < w*3; c++ {
			dv := int(crop[r*w*3+c]) - int(full[((y+r)*320+x)*3+c])
			dv = max(dv, -dv)
			if r < 1 || c < 3 || r >= h-2 || c >= (w-2)*3 {
				edge = max(edge, dv)
			} else {
				inner = max(inner, dv)
			}
		}
	}
	t.Logf("max |Δ| inside %d, on the first and the last two rows and columns %d", inner, edge)
	if inner != 0 || edge > 16 {
		t.Errorf("lossless crop differs from the full decode: max |Δ| %d inside (want 0), %d at the edge (want ≤ 16)", inner, edge)
	}
	if _, err := tr.Crop(dst, data, x+1, y, w, h, hdr.Subsampling); err == nil {
		t.Error("a crop off the MCU grid was accepted")
	}
	if _, err := tr.Crop(dst, data, x, y, w, h, hdr.Subsampling); err != nil {
		t.Errorf("crop after an error: %v", err)
	}
}
