package decode

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/psiflow/psiflow/stage/decode/turbojpeg"
)

// TestGoTestdata decodes the real JPEGs of the Go distribution (progressive,
// CMYK, gray, restart markers, every chroma subsampling, truncated) with both
// backends: each decodes to the expected size, or fails with an error that
// names the file.
func TestGoTestdata(t *testing.T) {
	cases := []struct {
		file    string
		w, h    int
		wantErr bool
		cut     bool // feed only the first half of the file
	}{
		{"video-001.jpeg", 150, 103, false, false},
		{"video-001.jpeg", 0, 0, true, true},
		{"video-001.progressive.jpeg", 0, 0, true, true},
		{"video-001.restart2.jpeg", 0, 0, true, true},
		{"video-001.cmyk.jpeg", 0, 0, true, true},
		{"video-005.gray.jpeg", 0, 0, true, true},
		{"video-001.png", 0, 0, true, true},
		{"video-001.progressive.jpeg", 150, 103, false, false},
		// "truncated" here means fewer progressive scans, ending with EOI:
		// a valid, blurrier image (Pillow decodes it too).
		{"video-001.progressive.truncated.jpeg", 150, 103, false, false},
		{"video-001.cmyk.jpeg", 150, 103, false, false},
		{"video-001.rgb.jpeg", 150, 103, false, false},
		{"video-001.restart2.jpeg", 150, 103, false, false},
		{"video-001.221212.jpeg", 150, 103, false, false},
		{"video-001.q50.410.jpeg", 150, 103, false, false},
		{"video-001.q50.410.progressive.jpeg", 150, 103, false, false},
		{"video-001.q50.411.jpeg", 150, 103, false, false},
		{"video-001.q50.411.progressive.jpeg", 150, 103, false, false},
		{"video-001.q50.420.jpeg", 150, 103, false, false},
		{"video-001.q50.420.progressive.jpeg", 150, 103, false, false},
		{"video-001.q50.422.jpeg", 150, 103, false, false},
		{"video-001.q50.422.progressive.jpeg", 150, 103, false, false},
		{"video-001.q50.440.jpeg", 150, 103, false, false},
		{"video-001.q50.440.progressive.jpeg", 150, 103, false, false},
		{"video-001.q50.444.jpeg", 150, 103, false, false},
		{"video-001.q50.444.progressive.jpeg", 150, 103, false, false},
		{"video-001.separate.dc.progression.jpeg", 150, 103, false, false},
		{"video-001.separate.dc.progression.progressive.jpeg", 150, 103, false, false},
		{"video-005.gray.jpeg", 150, 103, false, false},
		{"video-005.gray.q50.jpeg", 150, 103, false, false},
		{"video-005.gray.q50.progressive.jpeg", 150, 103, false, false},
		{"video-005.gray.q50.2x2.jpeg", 150, 103, false, false},
		{"video-005.gray.q50.2x2.progressive.jpeg", 150, 103, false, false},
		{"video-001.png", 150, 103, false, false},
		{"video-001.progressive.truncated.png", 150, 103, false, false},
		{"video-005.gray.png", 150, 103, false, false},
	}
	for _, b := range []Backend{BackendTurbo, BackendStd} {
		t.Run(b.String(), func(t *testing.T) {
			d := newDecoder(t, b)
			var m Image
			for _, c := range cases {
				name := c.file
				if c.cut {
					name += "/cut"
				}
				t.Run(name, func(t *testing.T) {
					p := goTestdata(t, c.file)
					data, err := os.ReadFile(p)
					if err != nil {
						t.Fatal(err)
					}
					if c.cut {
						data = data[:len(data)/2]
					}
					err = d.Decode(&m, data, p, 0)
					if c.wantErr {
						var de *Error
						if !errors.As(err, &de) || !strings.Contains(err.Error(), p) {
							t.Fatalf("Decode = %v, want an *Error naming %s", err, p)
						}
						return
					}
					if err != nil {
						t.Fatalf("Decode: %v", err)
					}
					if m.W != c.w || m.H != c.h || m.C != 3 || len(m.Pix) != c.w*c.h*3 {
						t.Fatalf("decoded %d×%d×%d (%d bytes), want %d×%d×3", m.W, m.H, m.C, len(m.Pix), c.w, c.h)
					}
				})
			}
		})
	}
}

// TestTestdataAgainstPillow compares full-size decodes of the Go test images
// with Pillow's: TurboJPEG (accurate DCT) must match Pillow closely (the same
// libjpeg-turbo underneath); the standard library within a looser bound
// (cruder chroma upsampling).
func TestTestdataAgainstPillow(t *testing.T) {
	files := []string{
		"video-001.jpeg", "video-001.progressive.jpeg", "video-001.cmyk.jpeg", "video-001.rgb.jpeg",
		"video-001.restart2.jpeg", "video-001.q50.420.jpeg", "video-001.q50.444.progressive.jpeg",
		"video-001.q50.411.jpeg", "video-005.gray.jpeg", "video-005.gray.q50.2x2.progressive.jpeg",
		"video-001.png", "video-005.gray.png",
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, goTestdata(t, f))
	}
	ref, refErr := pillowRef(t, 0, 0, paths)
	for _, c := range []struct {
		b             Backend
		mean          float64
		meanJPEGLoose float64
	}{
		{BackendTurbo, 0.05, 0.05},
		{BackendStd, 0.05, 6},
	} {
		t.Run(c.b.String(), func(t *testing.T) {
			d := newDecoder(t, c.b)
			for i, p := range paths {
				if ref[i] == nil {
					t.Fatalf("Pillow failed on %s: %s", p, refErr[i])
				}
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				var m Image
				if err := d.Decode(&m, data, p, 0); err != nil {
					t.Fatalf("Decode: %v", err)
				}
				mean, maxd := diff(t, &m, ref[i])
				limit := c.mean
				if Format(data) == "jpeg" {
					limit = c.meanJPEGLoose
				}
				t.Logf("%s: mean |Δ| %.4f, max %d", filepath.Base(p), mean, maxd)
				if mean > limit {
					t.Errorf("%s: mean |Δ| %.4f per byte against Pillow, want ≤ %v (max %d)", filepath.Base(p), mean, limit, maxd)
				}
			}
		})
	}
}

// TestResizeCropAgainstPillow is the correctness check: decode +
// Resize(256) + CenterCrop(224) agrees with Pillow + torchvision semantics.
func TestResizeCropAgainstPillow(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, sz := range [][2]int{{500, 375}, {375, 500}, {333, 500}, {640, 427}, {300, 200}, {257, 1000}, {200, 150}} {
		m := synthRGB(sz[0], sz[1], uint64(i), 12)
		paths = append(paths, writeFile(t, dir, filepath.Base(t.Name())+"-"+string(rune('a'+i))+".jpg", encodeJPEG(t, m, 85)))
	}
	paths = append(paths, writeFile(t, dir, "lossless.png", encodePNG(t, synthRGB(411, 299, 99, 30))))
	for _, f := range []string{"video-001.jpeg", "video-001.cmyk.jpeg", "video-005.gray.jpeg", "video-001.progressive.jpeg"} {
		paths = append(paths, goTestdata(t, f))
	}
	for _, c := range []struct {
		b          Backend
		mean, jpeg float64
	}{
		{BackendTurbo, 0.01, 0.05},
		{BackendStd, 0.01, 4},
	} {
		t.Run(c.b.String(), func(t *testing.T) {
			d := newDecoder(t, c.b)
			p, err := NewProcessor(d, Transform{Resize: 256, CenterCrop: 224})
			if err != nil {
				t.Fatal(err)
			}
			ref, refErr := pillowRef(t, 256, 224, paths)
			for i, path := range paths {
				if ref[i] == nil {
					t.Fatalf("Pillow failed on %s: %s", path, refErr[i])
				}
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				m, err := p.Image(Encoded{Data: data, Key: path})
				if err != nil {
					t.Fatal(err)
				}
				mean, maxd := diff(t, m, ref[i])
				limit := c.mean
				if Format(data) == "jpeg" {
					limit = c.jpeg
				}
				t.Logf("%s: mean |Δ| %.4f, max %d", filepath.Base(path), mean, maxd)
				if mean > limit {
					t.Errorf("%s: mean |Δ| %.4f per byte against Pillow, want ≤ %v (max %d)", filepath.Base(path), mean, limit, maxd)
				}
			}
		})
	}
}

// TestResizeCropAgainstTorchvision runs torchvision's own Resize(256) and
// CenterCrop(224) on PIL images (the DataLoader recipe) as the reference.
func TestResizeCropAgainstTorchvision(t *testing.T) {
	t.Parallel() // each starts Python with torch (seconds)
	dir := t.TempDir()
	var paths []string
	for i, sz := range [][2]int{{500, 375}, {375, 500}, {333, 500}, {225, 301}} {
		paths = append(paths, writeFile(t, dir, fmt.Sprintf("tv-%d.jpg", i), encodeJPEG(t, synthRGB(sz[0], sz[1], uint64(i+20), 12), 85)))
	}
	paths = append(paths, goTestdata(t, "video-001.q50.420.jpeg"))
	ref, refErr := torchvisionRef(t, 256, 224, paths)
	d := newDecoder(t, BackendTurbo)
	p, err := NewProcessor(d, Transform{Resize: 256, CenterCrop: 224})
	if err != nil {
		t.Fatal(err)
	}
	for i, path := range paths {
		if ref[i] == nil {
			t.Fatalf("torchvision failed on %s: %s", path, refErr[i])
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := p.Image(Encoded{Data: data, Key: path})
		if err != nil {
			t.Fatal(err)
		}
		mean, maxd := diff(t, m, ref[i])
		t.Logf("%s: mean |Δ| %.4f, max %d", filepath.Base(path), mean, maxd)
		if mean > 0.05 {
			t.Errorf("%s: mean |Δ| %.4f per byte against torchvision, want ≤ 0.05 (max %d)", filepath.Base(path), mean, maxd)
		}
	}
}

// TestCorrupt feeds broken data: each is an *Error naming the sample.
func TestCorrupt(t *testing.T) {
	good := encodeJPEG(t, synthRGB(64, 48, 1, 5), 90)
	sos := strings.Index(string(good), "\xff\xda")
	tablesOnly := append(append([]byte(nil), good[:sos]...), 0xFF, 0xD9)
	// tables-only: drop SOF (FFC0) but keep DQT/DHT
	if i := strings.Index(string(tablesOnly), "\xff\xc0"); i > 0 {
		n := int(tablesOnly[i+2])<<8 | int(tablesOnly[i+3])
		tablesOnly = append(tablesOnly[:i:i], tablesOnly[i+2+n:]...)
	}
	zeroHeight := append([]byte(nil), good...)
	if i := strings.Index(string(zeroHeight), "\xff\xc0"); i > 0 {
		zeroHeight[i+5], zeroHeight[i+6] = 0, 0
	}
	flipped := append([]byte(nil), good...)
	for i := sos + 20; i < len(flipped)-2; i += 7 {
		flipped[i] ^= 0x5A
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", []byte("this is not an image at all")},
		{"soi-only", []byte{0xFF, 0xD8, 0xFF}},
		{"truncated-half", good[:len(good)/2]},
		{"truncated-header", good[:sos]},
		{"tables-only", tablesOnly},
		{"zero-height", zeroHeight},
		{"png-truncated", encodePNG(t, synthRGB(32, 32, 2, 0))[:60]},
	}
	for _, b := range []Backend{BackendTurbo, BackendStd} {
		t.Run(b.String(), func(t *testing.T) {
			d := newDecoder(t, b)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					var m Image
					name := "/data/" + c.name + ".jpg"
					err := d.Decode(&m, c.data, name, 0)
					var de *Error
					if !errors.As(err, &de) || de.Name != name || !strings.Contains(err.Error(), name) {
						t.Fatalf("Decode = %v, want an *Error naming %s", err, name)
					}
				})
			}
			// bit flips in entropy data may decode to garbage or fail; they must not crash
			var m Image
			_ = d.Decode(&m, flipped, "flipped", 0)
			// the pooled handle still decodes good data correctly after all that
			var again, fresh Image
			if err := d.Decode(&again, good, "good", 0); err != nil {
				t.Fatalf("good data after errors: %v", err)
			}
			f := newDecoder(t, b)
			if err := f.Decode(&fresh, good, "good", 0); err != nil {
				t.Fatal(err)
			}
			if string(again.Pix) != string(fresh.Pix) {
				t.Fatal("decoder output changed after errors")
			}
		})
	}
}

// TestDCTScaling checks that scaled decodes have the exact scaled size and
// stay close to a full decode followed by the same resize.
func TestDCTScaling(t *testing.T) {
	d := newDecoder(t, BackendTurbo)
	full := newDecoder(t, BackendTurbo, func(o *Options) { o.NoDCTScaling = true })
	data := encodeJPEG(t, synthRGB(1000, 750, 3, 4), 90)
	cases := []struct {
		minShort int
		num, den int
		wantW    int
		wantH    int
	}{
		{0, 1, 1, 1000, 750},
		{400, 1, 1, 1000, 750},
		{187, 1, 2, 500, 375},
		{93, 1, 4, 250, 188},
		{40, 1, 8, 125, 94},
		{10, 1, 8, 125, 94},
	}
	var r Resizer
	for _, c := range cases {
		num, den := d.Scale(1000, 750, c.minShort)
		if num != c.num || den != c.den {
			t.Errorf("Scale(minShort %d) = %d/%d, want %d/%d", c.minShort, num, den, c.num, c.den)
		}
		var m Image
		if err := d.Decode(&m, data, "big.jpg", c.minShort); err != nil {
			t.Fatal(err)
		}
		if m.W != c.wantW || m.H != c.wantH {
			t.Errorf("minShort %d: decoded %d×%d, want %d×%d", c.minShort, m.W, m.H, c.wantW, c.wantH)
		}
		if c.minShort == 0 {
			continue
		}
		var a, b, fm Image
		if err := full.Decode(&fm, data, "big.jpg", c.minShort); err != nil {
			t.Fatal(err)
		}
		if m.SrcW != 1000 || m.SrcH != 750 {
			t.Errorf("minShort %d: source size %d×%d, want 1000×750", c.minShort, m.SrcW, m.SrcH)
		}
		tw, th := ShorterSide(m.SrcW, m.SrcH, c.minShort)
		if err := r.Resize(&a, &m, tw, th); err != nil {
			t.Fatal(err)
		}
		if err := r.Resize(&b, &fm, tw, th); err != nil {
			t.Fatal(err)
		}
		mean, maxd := diff(t, &a, &b)
		t.Logf("minShort %d: scaled vs full decode after resize: mean %.3f max %d", c.minShort, mean, maxd)
		if mean > 3 {
			t.Errorf("minShort %d: scaled decode differs from full decode by %.3f per byte after resize", c.minShort, mean)
		}
	}
}

// TestConcurrentDecode shares one Decoder between goroutines (run with -race).
func TestConcurrentDecode(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	data := encodeJPEG(t, synthRGB(120, 90, 5, 8), 85)
	var want Image
	if err := d.Decode(&want, data, "x", 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m Image
			for i := 0; i < 20; i++ {
				if err := d.Decode(&m, data, "x", 0); err != nil {
					errs <- err
					return
				}
				if string(m.Pix) != string(want.Pix) {
					errs <- errors.New("concurrent decode differs")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDecodeAfterClose(t *testing.T) {
	d, err := NewDecoder(Options{Backend: BackendTurbo})
	if err != nil {
		t.Skipf("TurboJPEG not available here: %v", err)
	}
	data := encodeJPEG(t, synthRGB(16, 16, 1, 0), 85)
	var m Image
	if err := d.Decode(&m, data, "a", 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(&m, data, "b.jpg", 0); !errors.Is(err, errClosed) || !strings.Contains(err.Error(), "b.jpg") {
		t.Fatalf("Decode after Close = %v, want the closed error naming b.jpg", err)
	}
}

func TestBackendSelection(t *testing.T) {
	std := newDecoder(t, BackendStd)
	if std.Backend() != "stdlib" || std.FallbackReason() == nil || std.Library() != "" {
		t.Errorf("std decoder: backend %q, reason %v, library %q", std.Backend(), std.FallbackReason(), std.Library())
	}
	auto := newDecoder(t, BackendAuto)
	if _, err := turbojpeg.Default(); err == nil {
		if auto.Backend() != "turbojpeg" || auto.FallbackReason() != nil || auto.Library() == "" {
			t.Errorf("auto decoder with TurboJPEG present: backend %q, reason %v", auto.Backend(), auto.FallbackReason())
		}
	} else if auto.Backend() != "stdlib" || auto.FallbackReason() == nil {
		t.Errorf("auto decoder without TurboJPEG: backend %q, reason %v", auto.Backend(), auto.FallbackReason())
	}
	if _, err := NewDecoder(Options{Backend: Backend(42)}); err == nil {
		t.Error("unknown backend accepted")
	}
}

func TestPNGKinds(t *testing.T) {
	rgb := synthRGB(37, 23, 4, 20)
	gray := image.NewGray(rgb.Bounds())
	pal := image.NewPaletted(rgb.Bounds(), nil)
	nrgba := image.NewNRGBA(rgb.Bounds())
	rgba64 := image.NewRGBA64(rgb.Bounds())
	for y := 0; y < 23; y++ {
		for x := 0; x < 37; x++ {
			c := rgb.RGBAAt(x, y)
			gray.Pix[y*gray.Stride+x] = c.G
			nrgba.Pix[y*nrgba.Stride+4*x+0], nrgba.Pix[y*nrgba.Stride+4*x+1], nrgba.Pix[y*nrgba.Stride+4*x+2], nrgba.Pix[y*nrgba.Stride+4*x+3] = c.R, c.G, c.B, uint8(x*7)
			rgba64.Set(x, y, c)
		}
	}
	pal.Palette = make([]color.Color, 0, 256)
	for i := 0; i < 256; i++ {
		pal.Palette = append(pal.Palette, color.NRGBA{uint8(i), uint8(255 - i), uint8(i * 3), uint8(i)})
	}
	for i := range pal.Pix {
		pal.Pix[i] = uint8(i * 13)
	}
	dir := t.TempDir()
	var paths []string
	for name, m := range map[string]image.Image{"rgb": rgb, "gray": gray, "pal": pal, "nrgba": nrgba, "rgba64": rgba64} {
		paths = append(paths, writeFile(t, dir, name+".png", encodePNG(t, m)))
	}
	ref, refErr := pillowRef(t, 0, 0, paths)
	d := newDecoder(t, BackendAuto)
	for i, p := range paths {
		if ref[i] == nil {
			t.Fatalf("Pillow failed on %s: %s", p, refErr[i])
		}
		data, _ := os.ReadFile(p)
		var m Image
		if err := d.Decode(&m, data, p, 0); err != nil {
			t.Fatal(err)
		}
		if mean, maxd := diff(t, &m, ref[i]); maxd != 0 {
			t.Errorf("%s: differs from Pillow: mean %.3f max %d", filepath.Base(p), mean, maxd)
		}
	}
}

var _ = runtime.GOOS
