package imagefolder

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/reexec"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/tensor"
)

func TestMain(m *testing.M) {
	reexec.Init()
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}

// helperEnv selects a child-process mode of the test binary (see helpers).
const helperEnv = "PSIFLOW_IMAGEFOLDER_TEST_HELPER"

// helpers are the child-process modes, registered by platform test files.
var helpers = map[string]func() error{}

func runHelper(mode string) int {
	h, ok := helpers[mode]
	if !ok {
		fmt.Println("unknown helper mode", mode)
		return 2
	}
	if err := h(); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// writeFolder writes n small JPEGs spread over two class directories.
func writeFolder(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("class%d", i%2))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		m := image.NewRGBA(image.Rect(0, 0, 80+i, 60))
		for y := range 60 {
			for x := range 80 + i {
				m.Set(x, y, color.RGBA{uint8(x * i), uint8(y), 99, 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.jpg", i)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func smallConfig(root string) Config {
	c := DefaultConfig(root)
	c.Workers, c.BatchSize, c.Resize, c.Crop, c.Queue, c.Budget, c.ReadBuffers = 2, 8, 48, 32, 2, 1<<20, 0
	c.Pressure = false
	return c
}

func TestRunDeliversBatches(t *testing.T) {
	root := writeFolder(t, 21)
	tests := []struct {
		name        string
		limit       int64
		epochs      int
		readBuffers int64
		memory      memory.Mode // "": elastic; "none": no runtime
		pressure    bool
		want        string // batch sizes in order
	}{
		{name: "all", want: "[8 8 5]"},
		{name: "limit", limit: 10, want: "[8 8]"},
		{name: "two epochs", epochs: 2, want: "[8 8 5 8 8 5]"},
		{name: "uma read buffers", readBuffers: 4 << 20, want: "[8 8 5]"},
		{name: "fixed", memory: memory.Fixed, want: "[8 8 5]"},
		{name: "plain", memory: "none", want: "[8 8 5]"},
		{name: "plain uma read buffers", memory: "none", readBuffers: 4 << 20, want: "[8 8 5]"},
		{name: "elastic with pressure", pressure: true, epochs: 2, want: "[8 8 5 8 8 5]"},
		{name: "source's own pool", readBuffers: -1, want: "[8 8 5]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallConfig(root)
			c.Limit, c.ReadBuffers, c.Pressure = tt.limit, tt.readBuffers, tt.pressure
			switch tt.memory {
			case "none":
				c.Memory = ""
			case "":
			default:
				c.Memory = tt.memory
			}
			if tt.epochs > 0 {
				c.Epochs = tt.epochs
			}
			var mu sync.Mutex
			var sizes []int
			labels := map[int64]int{}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sum, err := Run(ctx, c, Hooks{Consume: func(_ context.Context, b *tensor.Batch) error {
				mu.Lock()
				defer mu.Unlock()
				sizes = append(sizes, len(b.Keys))
				for _, l := range b.Labels {
					labels[l]++
				}
				if got := b.Tensor.Shape; fmt.Sprint(got) != fmt.Sprintf("[%d 3 32 32]", len(b.Keys)) {
					return fmt.Errorf("tensor shape %v", got)
				}
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(sizes) != tt.want {
				t.Fatalf("batch sizes %v, want %s", sizes, tt.want)
			}
			if sum.Items != int64(sumOf(sizes)) || sum.Batches != int64(len(sizes)) || sum.Peak <= 0 || sum.Peak > c.Budget || sum.Elapsed <= 0 {
				t.Fatalf("summary %+v for batches %v", sum, sizes)
			}
			if tt.limit == 0 && (labels[0] == 0 || labels[1] == 0 || labels[-1] != 0) {
				t.Fatalf("labels %v: want classes 0 and 1 only", labels)
			}
		})
	}
}

func sumOf(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

func TestRunReportsProgressAndInfo(t *testing.T) {
	root := writeFolder(t, 9)
	var mu sync.Mutex
	var infos []string
	var snaps []progress.Snapshot
	_, err := Run(context.Background(), smallConfig(root), Hooks{
		Info:     func(s string) { mu.Lock(); infos = append(infos, s); mu.Unlock() },
		Progress: func(s progress.Snapshot) { mu.Lock(); snaps = append(snaps, s); mu.Unlock() },
		Interval: time.Microsecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(infos, "\n")
	if !strings.Contains(joined, "reader: ") || !strings.Contains(joined, "JPEG decoder: ") {
		t.Fatalf("info lines %q", infos)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Dir = "" }, "no folder"},
		{func(c *Config) { c.Workers = 0 }, "workers 0"},
		{func(c *Config) { c.Readers = -1 }, "readers -1"},
		{func(c *Config) { c.BatchSize = 0 }, "batch size 0"},
		{func(c *Config) { c.Crop = 0 }, "crop 0"},
		{func(c *Config) { c.Queue = 0 }, "queue 0"},
		{func(c *Config) { c.Budget = 0 }, "budget 0"},
		{func(c *Config) { c.Epochs = 0 }, "epochs 0"},
		{func(c *Config) { c.Limit = -1 }, "limit -1"},
		{func(c *Config) { c.ReadBuffers = -2 }, "read buffers -2"},
		{func(c *Config) { c.Memory, c.ReadBuffers = "", -1 }, "read buffers -1"},
		{func(c *Config) { c.Memory = "big" }, `memory mode "big"`},
	}
	for _, tc := range tests {
		c := DefaultConfig("x")
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v; want %q", err, tc.want)
		}
		if _, err := Run(context.Background(), c, Hooks{}); err == nil {
			t.Errorf("Run accepted %+v", c)
		}
	}
}

func TestFloorOf(t *testing.T) {
	root := writeFolder(t, 6)
	files, err := source.Dir(root, Extensions...)
	if err != nil {
		t.Fatal(err)
	}
	c := smallConfig(root)
	f, err := FloorOf(c, files.Paths())
	if err != nil {
		t.Fatal(err)
	}
	if f.Encoded < 1<<20 || f.Output != 2*8*3*32*32 || f.Scratch != 2*scratchPerWorker || f.Total() != f.Encoded+f.Output+f.Scratch {
		t.Fatalf("floor %+v", f)
	}
	if _, err := FloorOf(c, []string{filepath.Join(root, "missing.jpg")}); err == nil || !strings.Contains(err.Error(), "missing.jpg") {
		t.Fatalf("floor of a missing file: %v", err)
	}
}

// TestSkipBadImages: with OnError skip, every good image of every epoch is
// delivered exactly once, every bad one (truncated, not an image, a PNG
// header claiming 100000×100000) is named and counted, never delivered.
func TestSkipBadImages(t *testing.T) {
	root := writeFolder(t, 30)
	bad := map[string][]byte{
		"class0/truncated.jpg": nil,
		"class1/garbage.jpg":   []byte("<html>404</html>"),
		"class1/bomb.png": append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x01\x86\xa0\x00\x01\x86\xa0\x08\x00\x00\x00\x00"),
			make([]byte, 40)...),
	}
	good, err := os.ReadFile(filepath.Join(root, "class0", "000.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	bad["class0/truncated.jpg"] = good[:len(good)/3]
	for name, data := range bad {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, ordered := range []bool{false, true} {
		c := smallConfig(root)
		c.Epochs, c.Ordered, c.OnError = 2, ordered, stage.Skip
		var mu sync.Mutex
		delivered := map[string]int{}
		skipped := map[string]int{}
		sum, err := Run(context.Background(), c, Hooks{
			Consume: func(_ context.Context, b *tensor.Batch) error {
				mu.Lock()
				defer mu.Unlock()
				for _, k := range b.Keys {
					delivered[k]++
				}
				return nil
			},
			Skipped: func(key string, err error) {
				mu.Lock()
				defer mu.Unlock()
				if !strings.Contains(err.Error(), key) {
					t.Errorf("skip of %s says %v", key, err)
				}
				skipped[key]++
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Elapsed <= 0 {
			t.Errorf("elapsed %v", sum.Elapsed)
		}
		if len(delivered) != 30 || sum.Items != 60 || sum.Skipped != 6 || len(skipped) != 3 {
			t.Fatalf("ordered=%v: %d distinct delivered, %d items, %d skipped (%v)", ordered, len(delivered), sum.Items, sum.Skipped, skipped)
		}
		for k, n := range delivered {
			if n != 2 {
				t.Errorf("%s delivered %d times in 2 epochs", k, n)
			}
		}
		for name := range bad {
			if skipped[filepath.Join(root, name)] != 2 {
				t.Errorf("%s skipped %d times, want 2", name, skipped[filepath.Join(root, name)])
			}
		}
	}
	// the default stops at the first bad image and names it
	c := smallConfig(root)
	_, err = Run(context.Background(), c, Hooks{})
	if err == nil || !strings.Contains(err.Error(), root) {
		t.Fatalf("stop policy: %v", err)
	}
	c.OnError, c.MaxSkips = stage.Skip, 2
	if _, err = Run(context.Background(), c, Hooks{Skipped: func(string, error) {}}); err == nil || !strings.Contains(err.Error(), "-max-skips 2") {
		t.Fatalf("max skips: %v", err)
	}
	c.MaxSkips = -1
	if err := c.Validate(); err == nil {
		t.Fatal("negative MaxSkips accepted")
	}
}

// TestEverySampleSkipped: skipping every sample of an epoch is an error, not an
// empty success.
func TestEverySampleSkipped(t *testing.T) {
	root := writeFolder(t, 5)
	c := smallConfig(root)
	c.OnError, c.MaxPixels = stage.Skip, 100
	c.Resize, c.Crop = 8, 8
	var n atomic.Int64
	_, err := Run(context.Background(), c, Hooks{Skipped: func(string, error) { n.Add(1) }})
	if err == nil || !strings.Contains(err.Error(), "every one of the 5 samples was skipped") || n.Load() != 5 {
		t.Fatalf("Run = %v after %d skips", err, n.Load())
	}
}
