package decode

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage/decode/turbojpeg"
	"github.com/psiflow/psiflow/tensor"
)

func TestSampleRand(t *testing.T) {
	draw := func(seed uint64, epoch, index int64) [4]uint64 {
		r := SampleRand(seed, epoch, index)
		return [4]uint64{r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()}
	}
	base := draw(1, 2, 3)
	if draw(1, 2, 3) != base {
		t.Fatal("the same (seed, epoch, index) gave two streams")
	}
	// every neighbour differs, and so do swapped arguments
	for _, c := range []struct {
		seed         uint64
		epoch, index int64
	}{{0, 2, 3}, {2, 2, 3}, {1, 1, 3}, {1, 3, 3}, {1, 2, 2}, {1, 2, 4}, {1, 3, 2}, {3, 2, 1}, {1, -2, 3}} {
		if draw(c.seed, c.epoch, c.index) == base {
			t.Errorf("(%d, %d, %d) gives the stream of (1, 2, 3)", c.seed, c.epoch, c.index)
		}
	}
	// neighbouring indices give unrelated first draws: about half the bits differ
	var flips int
	for i := int64(0); i < 1000; i++ {
		a, b := SampleRand(7, 0, i).Uint64(), SampleRand(7, 0, i+1).Uint64()
		for x := a ^ b; x != 0; x &= x - 1 {
			flips++
		}
	}
	if mean := float64(flips) / 1000; mean < 30 || mean > 34 {
		t.Errorf("neighbouring indices differ in %.1f of 64 bits on average, want ≈ 32", mean)
	}
}

// TestRandomResizedCropBox checks the fallback of torchvision's rule and
// that every drawn box lies inside the image with the area and ratio asked.
func TestRandomResizedCropBox(t *testing.T) {
	for _, c := range []struct {
		name         string
		w, h         int
		rc           ResizedCrop
		x, y, cw, ch int
	}{
		// a box of the whole area at ratio 1 never fits 100×50: the
		// fallback clamps the ratio to 1 (h = 50, w = round(50 × 1))
		{"wide", 100, 50, ResizedCrop{Scale: [2]float64{1, 1}, Ratio: [2]float64{1, 1}}, 25, 0, 50, 50},
		{"tall", 50, 100, ResizedCrop{Scale: [2]float64{1, 1}, Ratio: [2]float64{1, 1}}, 0, 25, 50, 50},
		// narrower than the ratio range: the full width, h = round(60 / 2)
		{"narrow", 60, 60, ResizedCrop{Scale: [2]float64{1, 1}, Ratio: [2]float64{2, 3}}, 0, 15, 60, 30},
		// 1000×10 with the default ranges: no draw fits 10 rows; the
		// fallback keeps h = 10 and w = round(10 × 4/3) = 13
		{"strip", 1000, 10, ResizedCrop{}, 493, 0, 13, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range int64(50) {
				x, y, cw, ch := RandomResizedCropBox(c.w, c.h, c.rc, SampleRand(1, 0, i))
				if [4]int{x, y, cw, ch} != [4]int{c.x, c.y, c.cw, c.ch} {
					t.Fatalf("index %d: box %d×%d at (%d,%d), want %d×%d at (%d,%d)", i, cw, ch, x, y, c.cw, c.ch, c.x, c.y)
				}
			}
		})
	}
	for _, sz := range [][2]int{{500, 375}, {375, 500}, {3, 2}, {1, 1}, {4000, 3}} {
		for i := range int64(2000) {
			x, y, cw, ch := RandomResizedCropBox(sz[0], sz[1], ResizedCrop{}, SampleRand(2, 1, i))
			if cw <= 0 || ch <= 0 || x < 0 || y < 0 || x+cw > sz[0] || y+ch > sz[1] {
				t.Fatalf("%v: box %d×%d at (%d,%d) outside the image", sz, cw, ch, x, y)
			}
		}
	}
}

// ks is the two-sample Kolmogorov–Smirnov statistic: the largest distance
// between the empirical distribution functions of a and b.
func ks(a, b []float64) float64 {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	var d float64
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		v := min(a[i], b[j])
		for i < len(a) && a[i] == v {
			i++
		}
		for j < len(b) && b[j] == v {
			j++
		}
		d = max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}

// ksCritical is the two-sample KS distance above which the samples differ
// at significance 0.001 (c(α) = sqrt(-ln(α/2)/2) = 1.949).
func ksCritical(n, m int) float64 {
	return 1.949 * math.Sqrt(float64(n+m)/float64(n*m))
}

// TestRandomResizedCropDistribution draws boxes with torchvision's own
// RandomResizedCrop.get_params (fixed torch seed) and with psiflow's
// per-sample streams (fixed seed), and checks with two-sample KS tests that
// the area fraction, the aspect ratio and the position follow one
// distribution. Both sides are deterministic, so the test cannot flake; a
// sampling rule with a uniform instead of log-uniform ratio fails it.
func TestRandomResizedCropDistribution(t *testing.T) {
	t.Parallel() // each starts Python with torch (seconds)
	requirePython(t, "torchvision", "python3-torchvision")
	const n = 6000
	cases := []struct {
		w, h int
		rc   ResizedCrop
	}{
		{500, 375, ResizedCrop{}},
		{64, 48, ResizedCrop{}},   // small: rounding of the sides matters
		{900, 150, ResizedCrop{}}, // wide: many draws miss, fallbacks happen
		{300, 300, ResizedCrop{Scale: [2]float64{0.5, 1}, Ratio: [2]float64{0.5, 2}}},
	}
	var specs strings.Builder
	for i := range cases {
		cases[i].rc = cases[i].rc.withDefaults()
		rc := cases[i].rc
		fmt.Fprintf(&specs, "%d %d %d %d %g %g %g %g\n", cases[i].w, cases[i].h, n, i, rc.Scale[0], rc.Scale[1], rc.Ratio[0], rc.Ratio[1])
	}
	cmd := exec.Command(refPython, refScript(t, "torchvision_rrc.py"), "boxes")
	cmd.Stdin = strings.NewReader(specs.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torchvision_rrc.py boxes: %v", err)
	}
	groups := strings.Split(strings.TrimSpace(string(out)), "end")
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			type stats struct{ area, ratio, cx, cy []float64 }
			add := func(s *stats, x, y, bw, bh int) {
				s.area = append(s.area, float64(bw*bh)/float64(c.w*c.h))
				s.ratio = append(s.ratio, float64(bw)/float64(bh))
				// the position within its range (0.5 when the box fills an axis)
				fx, fy := 0.5, 0.5
				if c.w > bw {
					fx = float64(x) / float64(c.w-bw)
				}
				if c.h > bh {
					fy = float64(y) / float64(c.h-bh)
				}
				s.cx, s.cy = append(s.cx, fx), append(s.cy, fy)
			}
			var tv, ours stats
			for _, line := range strings.Split(strings.TrimSpace(groups[ci]), "\n") {
				var x, y, bw, bh int
				if _, err := fmt.Sscanf(line, "%d %d %d %d", &x, &y, &bw, &bh); err != nil {
					t.Fatalf("bad line %q: %v", line, err)
				}
				add(&tv, x, y, bw, bh)
			}
			if len(tv.area) != n {
				t.Fatalf("torchvision drew %d boxes, want %d", len(tv.area), n)
			}
			for i := range int64(n) {
				x, y, bw, bh := RandomResizedCropBox(c.w, c.h, c.rc, SampleRand(0, 0, i))
				add(&ours, x, y, bw, bh)
			}
			crit := ksCritical(n, n)
			for _, q := range []struct {
				what string
				a, b []float64
			}{{"area fraction", tv.area, ours.area}, {"aspect ratio", tv.ratio, ours.ratio},
				{"x position", tv.cx, ours.cx}, {"y position", tv.cy, ours.cy}} {
				d := ks(q.a, q.b)
				t.Logf("%s: KS distance %.4f (critical %.4f at α = 0.001)", q.what, d, crit)
				if d > crit {
					t.Errorf("%s: KS distance %.4f to torchvision's boxes exceeds %.4f: not the same distribution", q.what, d, crit)
				}
			}
		})
	}
}

// rrcFixture writes JPEGs of several sizes (and one PNG) for the resized
// crop tests.
func rrcFixture(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, sz := range [][2]int{{500, 375}, {375, 500}, {1024, 768}, {640, 427}, {200, 150}} {
		paths = append(paths, writeFile(t, dir, fmt.Sprintf("rrc-%d.jpg", i), encodeJPEG(t, synthRGB(sz[0], sz[1], uint64(i+40), 12), 85)))
	}
	paths = append(paths, writeFile(t, dir, "rrc.png", encodePNG(t, synthRGB(300, 280, 45, 20))))
	return paths
}

// TestResizedCropAgainstTorchvision: for the box a sample draws, the
// processor's output equals torchvision's resized_crop on the PIL image
// (the same bytes with Exact; within the reduced-size tolerance by default).
func TestResizedCropAgainstTorchvision(t *testing.T) {
	t.Parallel() // each starts Python with torch (seconds)
	requirePython(t, "torchvision", "python3-torchvision")
	paths := rrcFixture(t)
	d := newDecoder(t, BackendTurbo)
	modes := []struct {
		name       string
		exact      bool
		mean, psnr float64 // bounds: mean |Δ| at most, PSNR at least
	}{
		{"exact", true, 0.05, 60},
		{"reduced", false, 1.5, 35},
	}
	type crop struct {
		mode         int
		what         string
		got          *Image
		scaled, part bool
	}
	var lines strings.Builder
	var crops []crop
	for mi, c := range modes {
		p, err := NewProcessor(d, Transform{RandomResizedCrop: ResizedCrop{Size: 224}, Exact: c.exact, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		for i, path := range paths {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for k := range int64(6) {
				m, err := p.Image(Encoded{Key: path, Data: data, Index: int64(i)*100 + k})
				if err != nil {
					t.Fatal(err)
				}
				b := p.g.box
				fmt.Fprintf(&lines, "%s %d %d %d %d\n", path, b[1], b[0], b[3], b[2])
				crops = append(crops, crop{mi, fmt.Sprintf("%s box %v", filepath.Base(path), b),
					&Image{Pix: slices.Clone(m.Pix), W: m.W, H: m.H, C: m.C}, p.g.f != one, p.g.part})
			}
		}
	}
	dir := t.TempDir()
	ref, refErr := runReference(t, dir, lines.String(), len(crops), refScript(t, "torchvision_rrc.py"), "crop", dir, "224")
	nScaled, nPart := make([]int, len(modes)), make([]int, len(modes))
	for i, c := range crops {
		if c.part {
			nPart[c.mode]++
		}
		mode := modes[c.mode]
		if ref[i] == nil {
			t.Fatalf("torchvision failed on %s: %s", c.what, refErr[i])
		}
		mean, maxd := diff(t, c.got, ref[i])
		ps := psnr(t, c.got, ref[i])
		if c.scaled {
			nScaled[c.mode]++
		}
		if mode.exact && maxd != 0 {
			t.Errorf("%s: %s output differs from torchvision: mean %.4f, max %d", mode.name, c.what, mean, maxd)
		}
		if mean > mode.mean || ps < mode.psnr {
			t.Errorf("%s: %s (reduced size %v): mean |Δ| %.3f (≤ %v), max %d, PSNR %.1f dB (≥ %v)", mode.name, c.what, c.scaled, mean, mode.mean, maxd, ps, mode.psnr)
		}
	}
	for mi, c := range modes {
		t.Logf("%s: %d crops decoded at reduced size, %d of %d in part (the box only)", c.name, nScaled[mi], nPart[mi], len(crops)/len(modes))
		if _, err := d.CropDecoding(); err == nil && nPart[mi] == 0 {
			t.Errorf("%s: crop decoding is on, yet no crop was decoded in part", c.name)
		}
		if c.exact && nScaled[mi] != 0 || !c.exact && nScaled[mi] == 0 {
			t.Errorf("%s: %d crops decoded at reduced size", c.name, nScaled[mi])
		}
	}
}

// TestResizedCropEqualsCropResize: ResizedCrop is byte-identical to Crop
// followed by Resize, for random images, boxes and sizes.
func TestResizedCropEqualsCropResize(t *testing.T) {
	rng := SampleRand(5, 0, 0)
	var r Resizer
	for i := 0; i < 80; i++ {
		c := []int{1, 3, 4}[i%3]
		sw, sh := 1+rng.IntN(120), 1+rng.IntN(120)
		src := &Image{}
		src.Reset(sw, sh, c)
		for j := range src.Pix {
			src.Pix[j] = uint8(rng.IntN(256))
		}
		bw, bh := 1+rng.IntN(sw), 1+rng.IntN(sh)
		x, y := rng.IntN(sw-bw+1), rng.IntN(sh-bh+1)
		w, h := 1+rng.IntN(100), 1+rng.IntN(100)
		if i%7 == 0 {
			w, h = bw, bh // no resampling: a plain crop
		}
		var crop, want, got Image
		if err := Crop(&crop, src, x, y, bw, bh); err != nil {
			t.Fatal(err)
		}
		if err := r.Resize(&want, &crop, w, h); err != nil {
			t.Fatal(err)
		}
		if err := r.ResizedCrop(&got, src, x, y, bw, bh, w, h); err != nil {
			t.Fatal(err)
		}
		if got.W != w || got.H != h || string(got.Pix) != string(want.Pix) {
			t.Fatalf("case %d: %d×%d×%d, box %d×%d at (%d,%d) → %d×%d differs from crop + resize", i, sw, sh, c, bw, bh, x, y, w, h)
		}
	}
	var dst Image
	if err := r.ResizedCrop(&dst, seq(10, 10, 3), 5, 5, 6, 2, 4, 4); err == nil {
		t.Error("box outside the image accepted")
	}
}

// TestResizeBoxAgainstPillow checks fractional boxes (what a resize from a
// DCT-scaled decode uses) against Pillow's Image.resize(box=...).
func TestResizeBoxAgainstPillow(t *testing.T) {
	requirePython(t, "PIL", "python3-pil")
	dir := t.TempDir()
	src := synthRGB(211, 157, 3, 30)
	path := writeFile(t, dir, "box.png", encodePNG(t, src))
	d := newDecoder(t, BackendAuto)
	var m Image
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(&m, data, path, 0); err != nil {
		t.Fatal(err)
	}
	boxes := []struct {
		w, h               int
		bx0, by0, bx1, by1 float64
	}{
		{100, 80, 0, 0, 211, 157},
		{100, 80, 0, 0, 210.5, 156.5},
		{64, 64, 10.25, 20.75, 150.5, 100.125},
		{300, 200, 0.5, 0.5, 211, 157}, // enlargement
		{50, 90, 3, 7, 200, 150},
	}
	var lines strings.Builder
	for _, b := range boxes {
		fmt.Fprintf(&lines, "%s %d %d %g %g %g %g\n", path, b.w, b.h, b.bx0, b.by0, b.bx1, b.by1)
	}
	ref, refErr := runReference(t, dir, lines.String(), len(boxes), refScript(t, "torchvision_rrc.py"), "box", dir)
	var r Resizer
	for i, b := range boxes {
		if ref[i] == nil {
			t.Fatalf("Pillow failed on box %d: %s", i, refErr[i])
		}
		var got Image
		reg := region{w: m.W, h: m.H, bx0: b.bx0, by0: b.by0, bx1: b.bx1, by1: b.by1}
		if err := r.resizeRegion(&got, &m, reg, false, b.w, b.h, 0, 0, b.w, b.h); err != nil {
			t.Fatal(err)
		}
		if mean, maxd := diff(t, &got, ref[i]); maxd != 0 {
			t.Errorf("box %+v: differs from Pillow: mean %.4f, max %d", b, mean, maxd)
		}
	}
}

// TestPerSampleRandomness: a sample's random resized crop and flip depend
// on (seed, epoch, index) alone: the same in any order, through a stage
// with any worker count, and different across epochs and seeds.
func TestPerSampleRandomness(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	tr := Transform{RandomResizedCrop: ResizedCrop{Size: 24}, FlipProb: 0.5, Seed: 3, Layout: tensor.CHW}
	var items []*item
	var released atomic.Int64
	for i := range 24 {
		w, h := 60+i*5, 40+i*3
		items = append(items, &item{key: fmt.Sprintf("s%02d", i), data: encodeJPEG(t, synthRGB(w, h, uint64(i), 4), 90), released: &released})
	}
	get := func(epoch int64) func(*item) Encoded {
		return func(it *item) Encoded {
			i, _ := strconv.Atoi(it.key[1:])
			return Encoded{Key: it.key, Data: it.data, Index: int64(i), Epoch: epoch}
		}
	}
	// one processor, forwards and backwards
	p, err := NewProcessor(d, tr)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, it := range items {
		var out tensor.Tensor
		if err := p.Process(&out, get(0)(it)); err != nil {
			t.Fatal(err)
		}
		want[it.key] = string(out.U8)
	}
	for i := len(items) - 1; i >= 0; i-- {
		var out tensor.Tensor
		if err := p.Process(&out, get(0)(items[i])); err != nil {
			t.Fatal(err)
		}
		if string(out.U8) != want[items[i].key] {
			t.Fatalf("%s: a second pass in reverse order gave another crop", items[i].key)
		}
	}
	run := func(workers int, epoch int64, seed uint64) map[string]string {
		tr := tr
		tr.Seed = seed
		st, err := NewStage("decode", d, StageConfig{Workers: workers, Transform: tr}, get(epoch))
		if err != nil {
			t.Fatal(err)
		}
		g := flow.New("test")
		out := flow.Via(flow.FromSlice(g, "items", items), st)
		var mu sync.Mutex
		got := map[string]string{}
		flow.Sink(out, "sink", func(_ context.Context, s *tensor.Sample) error {
			mu.Lock()
			got[s.Key] = string(s.Tensor.U8)
			mu.Unlock()
			return nil
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := g.Run(ctx); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, workers := range []int{1, 4} {
		got := run(workers, 0, 3)
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%d workers: %s differs from the processor's output", workers, k)
			}
		}
	}
	for _, c := range []struct {
		name  string
		epoch int64
		seed  uint64
	}{{"next epoch", 1, 3}, {"other seed", 0, 4}} {
		got, same := run(2, c.epoch, c.seed), 0
		for k, v := range want {
			if got[k] == v {
				same++
			}
		}
		if same > 2 {
			t.Errorf("%s: %d of %d samples got the same crop and flip", c.name, same, len(want))
		}
	}
}

// TestIndexGuard: a decode stage with a random transform refuses an
// accessor that gives two samples one index (it does not set Index).
func TestIndexGuard(t *testing.T) {
	d := newDecoder(t, BackendAuto)
	var released atomic.Int64
	items := []*item{
		{key: "a", data: encodePNG(t, synthRGB(30, 20, 1, 0)), released: &released},
		{key: "b", data: encodePNG(t, synthRGB(30, 20, 2, 0)), released: &released},
	}
	for _, c := range []struct {
		tr      Transform
		wantErr bool
	}{
		{Transform{FlipProb: 0.5}, true},
		{Transform{RandomResizedCrop: ResizedCrop{Size: 8}}, true},
		{Transform{Resize: 10, CenterCrop: 8}, false}, // nothing random: no index needed
	} {
		st, err := NewStage("decode", d, StageConfig{Workers: 1, Ordered: true, Transform: c.tr}, getItem)
		if err != nil {
			t.Fatal(err)
		}
		g := flow.New("test")
		flow.Sink(flow.Via(flow.FromSlice(g, "items", items), st), "sink", func(context.Context, *tensor.Sample) error { return nil })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = g.Run(ctx)
		cancel()
		if c.wantErr && (err == nil || !strings.Contains(err.Error(), "Encoded.Index")) {
			t.Errorf("%+v: run = %v, want the duplicate-index error", c.tr, err)
		}
		if !c.wantErr && err != nil {
			t.Errorf("%+v: %v", c.tr, err)
		}
	}
}

// TestReducedDecoding checks when the processor decodes at reduced size
// (the next size at most half the source in both directions), that the
// scaled decode has the exact scaled size, and its accuracy against the
// full-size path.
func TestReducedDecoding(t *testing.T) {
	d := newDecoder(t, BackendTurbo)
	for _, c := range []struct {
		w, h  int
		tr    Transform
		scale turbojpeg.ScalingFactor
	}{
		{500, 375, Transform{Resize: 256, CenterCrop: 224}, one},      // 341×256 > half
		{1024, 768, Transform{Resize: 256, CenterCrop: 224}, half},    // 341×256 ≤ 512×384
		{1023, 511, Transform{Resize: 256, CenterCrop: 224}, one},     // 511/2 < 256: not half
		{1280, 960, Transform{Resize: 128, CenterCrop: 112}, quarter}, // 320×240 holds 170×128, 160×120 does not
		{1024, 768, Transform{Resize: 256, CenterCrop: 224, Exact: true}, one},
		{1600, 1200, Transform{Resize: 64}, eighth}, // 200×150 holds 85×64
	} {
		name := fmt.Sprintf("%dx%d-%d-exact=%v", c.w, c.h, c.tr.Resize, c.tr.Exact)
		t.Run(name, func(t *testing.T) {
			data := encodeJPEG(t, synthRGB(c.w, c.h, 5, 6), 90)
			p, err := NewProcessor(d, c.tr)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := p.Plan(Encoded{Data: data, Key: name})
			if err != nil {
				t.Fatal(err)
			}
			if p.g.f != c.scale {
				t.Fatalf("scale %v, want %v", p.g.f, c.scale)
			}
			if plan.DecodedW != c.scale.Scale(c.w) || plan.DecodedH != c.scale.Scale(c.h) {
				t.Errorf("plan decodes %d×%d, want %d×%d", plan.DecodedW, plan.DecodedH, c.scale.Scale(c.w), c.scale.Scale(c.h))
			}
			m, err := p.Image(Encoded{Data: data, Key: name})
			if err != nil {
				t.Fatal(err)
			}
			if p.a.W != c.scale.Scale(c.w) || p.a.H != c.scale.Scale(c.h) {
				t.Errorf("decoded %d×%d, want %d×%d", p.a.W, p.a.H, c.scale.Scale(c.w), c.scale.Scale(c.h))
			}
			got := &Image{Pix: slices.Clone(m.Pix), W: m.W, H: m.H, C: m.C}
			exact := c.tr
			exact.Exact = true
			pe, err := NewProcessor(d, exact)
			if err != nil {
				t.Fatal(err)
			}
			want, err := pe.Image(Encoded{Data: data, Key: name})
			if err != nil {
				t.Fatal(err)
			}
			mean, maxd := diff(t, got, want)
			ps := psnr(t, got, want)
			t.Logf("reduced vs full size: mean |Δ| %.3f, max %d, PSNR %.1f dB", mean, maxd, ps)
			if c.scale == one && maxd != 0 {
				t.Errorf("not scaled, yet differs from the full-size path (max %d)", maxd)
			}
			if mean > 1.5 || ps < 35 {
				t.Errorf("reduced-size output: mean |Δ| %.3f (≤ 1.5), PSNR %.1f dB (≥ 35) against the full-size path", mean, ps)
			}
		})
	}
}

var (
	half    = turbojpeg.ScalingFactor{Num: 1, Denom: 2}
	quarter = turbojpeg.ScalingFactor{Num: 1, Denom: 4}
	eighth  = turbojpeg.ScalingFactor{Num: 1, Denom: 8}
)
