//go:build linux && amd64

package turbojpeg

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func loadRegionCalls(t *testing.T, mode string) *RegionLib {
	t.Helper()
	t.Setenv(EnvCalls, mode)
	l, err := LoadRegion("")
	if err != nil {
		t.Skipf("region decoding not available here (install libjpeg62-turbo): %v", err)
	}
	if l.direct != (mode == "direct") {
		t.Fatalf("%s=%s: direct calls %v", EnvCalls, mode, l.direct)
	}
	return l
}

// TestDirectCallsDecodeTheSameRegions is TestDirectCallsDecodeTheSameBytes
// for region decoding, whose errors leave libjpeg through regionErrorExit
// (a longjmp to regionCall's frame) inside the direct call.
func TestDirectCallsDecodeTheSameRegions(t *testing.T) {
	t.Setenv(EnvCalls, "bogus")
	if _, err := LoadRegion(""); !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), EnvCalls) {
		t.Fatalf("LoadRegion with %s=bogus = %v, want ErrNotAvailable naming the variable", EnvCalls, err)
	}
	sys, dir := loadRegionCalls(t, "syscall"), loadRegionCalls(t, "direct")
	rs, err := sys.NewRegionDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	rd, err := dir.NewRegionDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	data := noisy(t, 320, 240, 7)
	var a, b []byte
	for _, f := range []ScalingFactor{{1, 1}, {1, 2}, {1, 4}, {1, 8}} {
		for _, rect := range []Region{{0, 0, 8, 8}, {17, 9, 20, 13}, {0, 0, f.Scale(320), f.Scale(240)}} {
			if rect.X+rect.W > f.Scale(320) || rect.Y+rect.H > f.Scale(240) {
				continue
			}
			ga, ba, err := rs.DecodeRegion(data, f, PixelRGB, 0, rect, a)
			if err != nil {
				t.Fatal(err)
			}
			a = ba
			gb, bb, err := rd.DecodeRegion(data, f, PixelRGB, 0, rect, b)
			if err != nil {
				t.Fatalf("%v %+v: direct: %v", f, rect, err)
			}
			b = bb
			n := ga.W * ga.H * 3
			if ga != gb || !bytes.Equal(a[:n], b[:n]) {
				t.Fatalf("%v %+v: direct call decoded %+v and other bytes than %+v", f, rect, gb, ga)
			}
		}
	}
	for _, bad := range [][]byte{data[:len(data)/2], []byte("hello, world")} {
		if _, _, err := rd.DecodeRegion(bad, ScalingFactor{1, 1}, PixelRGB, 0, Region{0, 0, 320, 240}, b); err == nil {
			t.Fatal("direct call: a bad JPEG decoded without an error")
		}
	}
	if _, _, err := rd.DecodeRegion(data, ScalingFactor{1, 1}, PixelRGB, 0, Region{10, 10, 20, 20}, b); err != nil {
		t.Fatalf("direct call after errors: %v", err)
	}
}
