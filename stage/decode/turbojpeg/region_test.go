//go:build linux && amd64

package turbojpeg

import (
	"bytes"
	"errors"
	"fmt"
	"go/build"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func regionLibOrSkip(t testing.TB) *RegionLib {
	t.Helper()
	l, err := DefaultRegion()
	if err != nil {
		t.Skipf("region decoding not available here (install libjpeg62-turbo): %v", err)
	}
	return l
}

// noisy is a w×h JPEG (4:2:0, as image/jpeg writes it) of gradients and
// noise, the hard case for chroma upsampling at a region's edges.
func noisy(t testing.TB, w, h int, seed uint64) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			n := func(v int) uint8 { return uint8(min(max(v+rng.IntN(81)-40, 0), 255)) }
			m.Set(x, y, color.RGBA{n(x * 255 / w), n(y * 255 / h), n((x + y) * 128 / (w + h)), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// goRoot is the Go distribution's root: build.Default.GOROOT, which a test
// binary built with -trimpath (as make test builds them) does not know, else
// what `go env GOROOT` says.
func goRoot(t testing.TB) string {
	t.Helper()
	if r := build.Default.GOROOT; r != "" {
		return r
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("the Go distribution's root: not in the binary (-trimpath) and go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func goImage(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goRoot(t), "src", "image", "testdata", name))
	if err != nil {
		t.Skipf("Go distribution test images not found (%v)", err)
	}
	return b
}

// TestDecodeRegionEqualsFullDecode decodes random rectangles of images in
// every subsampling at every scale and checks that each rectangle's pixels
// are the bytes of TurboJPEG's full decode, and that the region holds the
// rectangle with at most an iMCU more on each side.
func TestDecodeRegionEqualsFullDecode(t *testing.T) {
	rl := regionLibOrSkip(t)
	tl := lib(t)
	full, err := tl.NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	rd, err := rl.NewRegionDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	images := map[string][]byte{"noisy 4:2:0 333×251": noisy(t, 333, 251, 1)}
	for _, n := range []string{"video-001.q50.420.jpeg", "video-001.q50.422.jpeg", "video-001.q50.440.jpeg",
		"video-001.q50.444.jpeg", "video-001.restart2.jpeg", "video-001.rgb.jpeg", "video-001.221212.jpeg",
		"video-005.gray.q50.jpeg", "video-005.gray.q50.2x2.jpeg"} {
		images[n] = goImage(t, n)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var buf, want []byte
	for name, data := range images {
		hdr, err := full.Header(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pf, ch := PixelRGB, 3
		if hdr.Colorspace == ColorspaceGray && strings.Contains(name, "gray.q50.jpeg") {
			pf, ch = PixelGray, 1 // the other gray file goes to RGB
		}
		for _, flags := range []Flags{0, FlagFastDCT, FlagFastUpsample} {
			for _, f := range []ScalingFactor{{1, 1}, {1, 2}, {1, 4}, {1, 8}} {
				sw, sh := f.Scale(hdr.Width), f.Scale(hdr.Height)
				if cap(want) < sw*sh*ch {
					want = make([]byte, sw*sh*ch)
				}
				want = want[:sw*sh*ch]
				if err := full.Decompress(data, hdr, f, pf, flags, want); err != nil {
					t.Fatalf("%s at %v: %v", name, f, err)
				}
				for i := 0; i < 25; i++ {
					rw, rh := 1+rng.IntN(sw), 1+rng.IntN(sh)
					rect := Region{X: rng.IntN(sw - rw + 1), Y: rng.IntN(sh - rh + 1), W: rw, H: rh}
					if i == 0 {
						rect = Region{0, 0, sw, sh}
					}
					var reg Region
					reg, buf, err = rd.DecodeRegion(data, f, pf, flags, rect, buf)
					if err != nil {
						t.Fatalf("%s at %v, %+v: %v", name, f, rect, err)
					}
					if reg.X > rect.X || reg.Y > rect.Y || reg.X+reg.W < rect.X+rect.W || reg.Y+reg.H < rect.Y+rect.H ||
						reg.X+reg.W > sw || reg.Y+reg.H > sh || rect.X-reg.X > 32 || reg.W-rect.W > 64 || reg.H-rect.H > 2 {
						t.Fatalf("%s at %v: region %+v for %+v in %d×%d", name, f, reg, rect, sw, sh)
					}
					for y := rect.Y; y < rect.Y+rect.H; y++ {
						a := want[(y*sw+rect.X)*ch : (y*sw+rect.X+rect.W)*ch]
						b := buf[((y-reg.Y)*reg.W+rect.X-reg.X)*ch:][:rect.W*ch]
						if !bytes.Equal(a, b) {
							t.Fatalf("%s at %v flags %d, %+v (region %+v): row %d differs from the full decode", name, f, flags, rect, reg, y)
						}
					}
				}
			}
		}
	}
}

// TestDecodeRegionErrors checks that what region decoding refuses, and
// libjpeg's fatal errors and warnings, come back as errors naming the
// cause, and that the decoder keeps working after each.
func TestDecodeRegionErrors(t *testing.T) {
	rl := regionLibOrSkip(t)
	rd, err := rl.NewRegionDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	good := noisy(t, 96, 64, 2)
	junk := append([]byte{0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x04}, bytes.Repeat([]byte{0x55}, 40)...)
	cases := []struct {
		name string
		data []byte
		f    ScalingFactor
		rect Region
		want string
	}{
		{"progressive", goImage(t, "video-001.progressive.jpeg"), ScalingFactor{1, 1}, Region{0, 0, 8, 8}, "progressive"},
		{"cmyk", goImage(t, "video-001.cmyk.jpeg"), ScalingFactor{1, 1}, Region{0, 0, 8, 8}, "colour space"},
		{"truncated", good[:len(good)/2], ScalingFactor{1, 1}, Region{0, 0, 96, 64}, "Premature end"},
		{"garbage header", junk, ScalingFactor{1, 1}, Region{0, 0, 8, 8}, "reading header"},
		{"not a JPEG", []byte("hello, world"), ScalingFactor{1, 1}, Region{0, 0, 8, 8}, "Not a JPEG"},
		{"outside", good, ScalingFactor{1, 2}, Region{40, 0, 9, 8}, "outside the 48×32 image"},
		{"empty rect", good, ScalingFactor{1, 1}, Region{0, 0, 0, 8}, "invalid region"},
		{"scale 3/8", good, ScalingFactor{3, 8}, Region{0, 0, 8, 8}, "scale 3/8"},
		{"empty", nil, ScalingFactor{1, 1}, Region{0, 0, 8, 8}, "empty data"},
	}
	var buf []byte
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, buf, err = rd.DecodeRegion(c.data, c.f, PixelRGB, 0, c.rect, buf)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeRegion = %v, want an error containing %q", err, c.want)
			}
			// still usable
			reg, b, err := rd.DecodeRegion(good, ScalingFactor{1, 1}, PixelRGB, 0, Region{10, 10, 20, 20}, buf)
			buf = b
			if err != nil || reg.W < 20 || reg.H != 22 {
				t.Fatalf("after the error: %+v, %v", reg, err)
			}
		})
	}
	if _, err := LoadRegion("libc.so.6"); !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "jpeg_CreateDecompress") {
		t.Errorf("LoadRegion(libc) = %v, want ErrNotAvailable naming the missing symbol", err)
	}
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rd.DecodeRegion(good, ScalingFactor{1, 1}, PixelRGB, 0, Region{0, 0, 8, 8}, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after Close: %v", err)
	}
}

// Decode the 64×48 rectangle at (100, 80) of a 320×240 gray JPEG at full
// size: the region decoded starts one pixel up and on the 8-pixel iMCU grid
// to the left, and ends one pixel past the rectangle.
func ExampleRegionDecoder() {
	lib, err := DefaultRegion()
	if err != nil {
		fmt.Println("no region decoding here:", errors.Is(err, ErrNotAvailable))
		return
	}
	d, err := lib.NewRegionDecoder()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	m := image.NewGray(image.Rect(0, 0, 320, 240))
	var b bytes.Buffer
	_ = jpeg.Encode(&b, m, nil)
	reg, pix, err := d.DecodeRegion(b.Bytes(), ScalingFactor{Num: 1, Denom: 1}, PixelRGB, 0, Region{X: 100, Y: 80, W: 64, H: 48}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("region %d×%d at (%d,%d), %d bytes\n", reg.W, reg.H, reg.X, reg.Y, len(pix))
	// Output: region 69×50 at (96,79), 10350 bytes
}

// FuzzDecodeRegion: whatever the bytes, a region decode returns pixels or
// an error (libjpeg's fatal errors and warnings come back through the
// protected call), never a crash, and the decoder keeps decoding good data.
func FuzzDecodeRegion(f *testing.F) {
	rl := regionLibOrSkip(f)
	good := noisy(f, 64, 48, 3)
	f.Add(good, uint16(5), uint16(7), uint16(30), uint16(20), uint8(1))
	f.Add(good[:len(good)/3], uint16(0), uint16(0), uint16(64), uint16(48), uint8(2))
	f.Add(goImage(f, "video-001.q50.422.jpeg"), uint16(10), uint16(10), uint16(40), uint16(40), uint8(4))
	rd, err := rl.NewRegionDecoder()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rd.Close() })
	var buf []byte
	f.Fuzz(func(t *testing.T, data []byte, x, y, w, h uint16, denom uint8) {
		sf := ScalingFactor{1, int32(denom)}
		_, buf, _ = rd.DecodeRegion(data, sf, PixelRGB, 0, Region{int(x), int(y), int(w), int(h)}, buf)
		if _, b, err := rd.DecodeRegion(good, ScalingFactor{1, 1}, PixelRGB, 0, Region{1, 1, 10, 10}, buf); err != nil {
			t.Fatalf("good data after a fuzzed input: %v", err)
		} else {
			buf = b
		}
	})
}
