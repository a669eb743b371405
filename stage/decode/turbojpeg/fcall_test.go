//go:build linux || darwin

package turbojpeg

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// loadCalls loads the library with EnvCalls set to mode.
func loadCalls(t *testing.T, mode string) *Lib {
	t.Helper()
	t.Setenv(EnvCalls, mode)
	l, err := Load("")
	if err != nil {
		t.Skipf("TurboJPEG not available here (install libturbojpeg0): %v", err)
	}
	if want := mode == "direct" && directSupported; l.direct != want {
		t.Fatalf("%s=%s: direct calls %v, want %v", EnvCalls, mode, l.direct, want)
	}
	return l
}

func TestCallsEnvRejectsUnknownValues(t *testing.T) {
	t.Setenv(EnvCalls, "fast")
	_, err := Load("")
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), EnvCalls) || !strings.Contains(err.Error(), `"fast"`) {
		t.Fatalf("Load with %s=fast = %v, want ErrNotAvailable naming the variable and its value", EnvCalls, err)
	}
}

// TestDirectCallsDecodeTheSameBytes decodes the same images through system
// calls and through direct calls (every scale, RGB and gray, the accurate
// and the fast DCT) and checks the bytes are equal, then that a bad image is
// an error in direct mode and the handle stays usable.
func TestDirectCallsDecodeTheSameBytes(t *testing.T) {
	sys, dir := loadCalls(t, "syscall"), loadCalls(t, "direct")
	ds, err := sys.NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	dd, err := dir.NewDecompressor()
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	var a, b []byte
	for _, size := range [][2]int{{16, 16}, {333, 250}, {500, 375}} {
		data := sample(t, size[0], size[1])
		hs, err := ds.Header(data)
		if err != nil {
			t.Fatal(err)
		}
		hd, err := dd.Header(data)
		if err != nil || hd != hs {
			t.Fatalf("%v: direct header %+v, %v; system-call header %+v", size, hd, err, hs)
		}
		for _, f := range sys.ScalingFactors() {
			for _, pf := range []PixelFormat{PixelRGB, PixelGray} {
				for _, fl := range []Flags{0, FlagFastDCT} {
					n := f.Scale(hs.Width) * f.Scale(hs.Height) * pf.Channels()
					a, b = append(a[:0], make([]byte, n)...), append(b[:0], make([]byte, n)...)
					for i := range b {
						b[i] = 0xA5 // a call that writes nothing cannot pass
					}
					if err := ds.Decompress(data, hs, f, pf, fl, a); err != nil {
						t.Fatal(err)
					}
					if err := dd.Decompress(data, hd, f, pf, fl, b); err != nil {
						t.Fatalf("%v at %v, format %d, flags %d: direct: %v", size, f, pf, fl, err)
					}
					if !bytes.Equal(a, b) {
						t.Fatalf("%v at %v, format %d, flags %d: direct call decoded other bytes", size, f, pf, fl)
					}
				}
			}
		}
	}
	good := sample(t, 64, 48)
	bad := good[:len(good)/2]
	h, err := dd.Header(good)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64*48*3)
	if err := dd.Decompress(bad, h, ScalingFactor{1, 1}, PixelRGB, 0, buf); err == nil {
		t.Fatal("direct call: truncated JPEG decoded without an error")
	}
	if _, err := dd.Header([]byte("not a JPEG at all")); err == nil {
		t.Fatal("direct call: header of a non-JPEG read without an error")
	}
	if err := dd.Decompress(good, h, ScalingFactor{1, 1}, PixelRGB, 0, buf); err != nil {
		t.Fatalf("direct call after errors: %v", err)
	}
}
