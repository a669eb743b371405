package decode

import (
	"bytes"
	"fmt"
	"go/build"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// synthRGB makes a deterministic photo-like test image: smooth gradients,
// a few shapes with sharp edges, and noise (so JPEGs are Huffman-heavy like
// real photos).
func synthRGB(w, h int, seed uint64, noise int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(seed, 7))
	cx, cy, r := rng.IntN(w), rng.IntN(h), 10+rng.IntN(min(w, h)/2+1)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			fx, fy := float64(x)/float64(w), float64(y)/float64(h)
			rr := 128 + 100*math.Sin(6*fx+float64(seed))
			gg := 255 * fy
			bb := 128 + 120*math.Cos(9*fx*fy)
			if (x-cx)*(x-cx)+(y-cy)*(y-cy) < r*r {
				rr, gg = 255-rr, 255-gg
			}
			if (x/17+y/23)%5 == 0 {
				bb = 20
			}
			n := 0
			if noise > 0 {
				n = rng.IntN(2*noise+1) - noise
			}
			m.SetRGBA(x, y, color.RGBA{clampU8(rr + float64(n)), clampU8(gg - float64(n)), clampU8(bb + float64(n)), 255})
		}
	}
	return m
}

func clampU8(v float64) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

func encodeJPEG(t testing.TB, m image.Image, q int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: q}); err != nil {
		t.Fatalf("encode jpeg: %v", err)
	}
	return b.Bytes()
}

func encodePNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatalf("encode png: %v", err)
	}
	return b.Bytes()
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
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

// goTestdata returns the path of a file in the Go distribution's image/testdata.
func goTestdata(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(goRoot(t), "src", "image", "testdata", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("Go distribution test images not found (%v)", err)
	}
	return p
}

const refPython = "/usr/bin/python3"

// pillowRef runs scripts/reference/pil_resize_crop.py on files and returns,
// per file, the reference image or the error message Pillow gave. It skips
// the test (saying why) when Debian's python3 with Pillow is missing.
func pillowRef(t testing.TB, resize, crop int, files []string) ([]*Image, []string) {
	return reference(t, false, resize, crop, files)
}

// torchvisionRef is pillowRef with torchvision's own Resize and CenterCrop;
// it skips when Debian's python3-torchvision is missing.
func torchvisionRef(t testing.TB, resize, crop int, files []string) ([]*Image, []string) {
	return reference(t, true, resize, crop, files)
}

// requirePython skips the test unless refPython imports module (Debian
// package pkg); under PSIFLOW_REQUIRE_PYTHON=1 (set by `make test`, which
// installs the packages) a missing module fails it instead.
func requirePython(t testing.TB, module, pkg string) {
	t.Helper()
	pyImportsMu.Lock()
	r, ok := pyImports[module]
	if !ok {
		// importing torch takes seconds: each module is tried once per run
		out, err := exec.Command(refPython, "-c", "import "+module).CombinedOutput()
		r = pyImport{out, err}
		pyImports[module] = r
	}
	pyImportsMu.Unlock()
	if out, err := r.out, r.err; err != nil {
		if os.Getenv("PSIFLOW_REQUIRE_PYTHON") == "1" {
			t.Fatalf("reference needs %s with %s (Debian %s): %v: %s", refPython, module, pkg, err, out)
		}
		t.Skipf("reference needs %s with %s (Debian %s): %v: %s", refPython, module, pkg, err, out)
	}
}

type pyImport struct {
	out []byte
	err error
}

var (
	pyImportsMu sync.Mutex
	pyImports   = map[string]pyImport{}
)

// refScript returns the path of scripts/reference/name.
func refScript(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "scripts", "reference", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func reference(t testing.TB, tv bool, resize, crop int, files []string) ([]*Image, []string) {
	t.Helper()
	requirePython(t, "PIL", "python3-pil")
	if tv {
		requirePython(t, "torchvision", "python3-torchvision")
	}
	dir := t.TempDir()
	args := []string{refScript(t, "pil_resize_crop.py")}
	if tv {
		args = append(args, "--torchvision")
	}
	args = append(append(args, dir, strconv.Itoa(resize), strconv.Itoa(crop)), files...)
	return runReference(t, dir, "", len(files), args...)
}

// runReference runs refPython with args (stdin from stdin) and reads its
// report: one line per image, "i W H" with the pixels in dir/i.rgb, or
// "i error MESSAGE".
func runReference(t testing.TB, dir, stdin string, n int, args ...string) ([]*Image, []string) {
	t.Helper()
	cmd := exec.Command(refPython, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference script: %v: %s", err, stderr.String())
	}
	imgs := make([]*Image, n)
	errs := make([]string, n)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 3 {
			t.Fatalf("reference script: bad line %q", line)
		}
		i, _ := strconv.Atoi(f[0])
		if f[1] == "error" {
			errs[i] = f[2]
			continue
		}
		w, _ := strconv.Atoi(f[1])
		h, _ := strconv.Atoi(f[2])
		pix, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.rgb", i)))
		if err != nil {
			t.Fatal(err)
		}
		imgs[i] = &Image{Pix: pix, W: w, H: h, C: 3}
	}
	return imgs, errs
}

// diff returns the mean and max absolute difference per byte of two images of
// the same size.
func diff(t testing.TB, a, b *Image) (mean float64, maxd int) {
	t.Helper()
	if a.W != b.W || a.H != b.H || a.C != b.C {
		t.Fatalf("size %d×%d×%d differs from %d×%d×%d", a.W, a.H, a.C, b.W, b.H, b.C)
	}
	var sum int64
	for i := range a.Pix[:a.W*a.H*a.C] {
		d := int(a.Pix[i]) - int(b.Pix[i])
		if d < 0 {
			d = -d
		}
		sum += int64(d)
		maxd = max(maxd, d)
	}
	return float64(sum) / float64(len(a.Pix)), maxd
}

// psnr is the peak signal-to-noise ratio of b against a in dB (+Inf when
// they are equal).
func psnr(t testing.TB, a, b *Image) float64 {
	t.Helper()
	if a.W != b.W || a.H != b.H || a.C != b.C {
		t.Fatalf("size %d×%d×%d differs from %d×%d×%d", a.W, a.H, a.C, b.W, b.H, b.C)
	}
	var se float64
	n := a.W * a.H * a.C
	for i := range a.Pix[:n] {
		d := float64(a.Pix[i]) - float64(b.Pix[i])
		se += d * d
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/(se/float64(n)))
}

func newDecoder(t testing.TB, b Backend, opts ...func(*Options)) *Decoder {
	t.Helper()
	o := Options{Backend: b}
	for _, f := range opts {
		f(&o)
	}
	d, err := NewDecoder(o)
	if err != nil {
		if b == BackendTurbo {
			t.Skipf("TurboJPEG not available here (install libturbojpeg0): %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}
