//go:build linux || darwin

package turbojpeg

import (
	"testing"
	"unsafe"
)

// maxSteadyAllocs is the most allocations per image the steady-state tests
// accept: none. Under the race detector purego's sync.Pool of call blocks
// drops one Put in four on purpose (sync.Pool.Put under race), so each of the
// two C calls per image reallocates its block a quarter of the time (≈ 0.5
// per image); testing.AllocsPerRun rounds down, and 1 is the bound there.
// The reflection-based wrappers this replaced made 13 per image.
func maxSteadyAllocs() float64 {
	if raceEnabled {
		return 1
	}
	return 0
}

// TestSteadyStateAllocs: a header read plus a decode into a reused buffer
// allocates nothing once the handle exists, and the handle keeps no
// reference to the caller's buffers afterwards.
func TestSteadyStateAllocs(t *testing.T) {
	l := lib(t)
	data := sample(t, 123, 77)
	cases := []struct {
		name string
		f    ScalingFactor
		pf   PixelFormat
	}{
		{"rgb full size", ScalingFactor{1, 1}, PixelRGB},
		{"rgb 1/2", ScalingFactor{1, 2}, PixelRGB},
		{"gray 1/4", ScalingFactor{1, 4}, PixelGray},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := l.NewDecompressor()
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			dst := make([]byte, c.f.Scale(123)*c.f.Scale(77)*c.pf.Channels())
			var hdr Header
			var derr error
			decode := func() {
				if hdr, derr = d.Header(data); derr == nil {
					derr = d.Decompress(data, hdr, c.f, c.pf, 0, dst)
				}
			}
			decode()
			if derr != nil {
				t.Fatal(derr)
			}
			if hdr.Width != 123 || hdr.Height != 77 {
				t.Fatalf("header %+v, want 123×77", hdr)
			}
			got := testing.AllocsPerRun(200, decode)
			if derr != nil {
				t.Fatal(derr)
			}
			if limit := maxSteadyAllocs(); got > limit {
				t.Errorf("%v allocations per header + decode, want ≤ %v", got, limit)
			}
			if d.pin != [len(d.pin)]unsafe.Pointer{} || d.args != [len(d.args)]uintptr{} {
				t.Error("the handle still holds the last call's buffers or arguments")
			}
		})
	}
}
