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
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/reexec"
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

// small is the preset over root, sized for tests (2 workers, batches of 8,
// Resize 48, CenterCrop 32, a 1 MiB budget, no gate), with more overrides.
func small(t *testing.T, root string, overrides ...string) *pipelines.Pipeline {
	t.Helper()
	p, err := New(root, append([]string{"decode.workers=2", "batch.size=8", "decode.resize=48", "decode.center_crop=32",
		"resources.queue=2", "resources.budget=1MiB", "resources.pressure=off"}, overrides...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNewIsTheShippedFile: with no override the preset is the shipped file
// with the launcher's defaults; dir and every override land on their keys;
// the environment is not read; a bad override is an error naming its key.
func TestNewIsTheShippedFile(t *testing.T) {
	t.Setenv("DATA", "/from/the/environment")
	t.Setenv("EPOCHS", "5")
	p, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	src, dec, r := p.Source.Config, p.Stages[0].Config, p.Resource
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"read.dir", src.String("dir"), "out/demo-jpeg"},
		{"epochs", p.Epochs, 1},
		{"read.direct", src.Bool("direct"), true},
		{"decode.resize", dec.Int("resize"), int64(256)},
		{"decode.center_crop", dec.Int("center_crop"), int64(224)},
		{"decode.label", dec.String("label"), "folder"},
		{"batch.size", p.Stages[1].Config.Int("size"), int64(64)},
		{"sink", p.Sink.Kind.Name, "discard"},
		{"resources.memory_mode", r.MemoryMode, memory.Elastic},
		{"resources.pressure", r.Pressure, true},
		{"resources.budget", r.Budget, int64(0)},
		{"resources.below_floor", r.BelowFloor, memory.PauseBelowFloor},
		{"resources.pause_timeout", r.PauseTimeout, pause.DefaultTimeout},
	} {
		if c.got != c.want {
			t.Errorf("default %s = %v, want %v", c.what, c.got, c.want)
		}
	}
	p, err = New("/data/my train", "batch.size=32", "read.shuffle=true", "resources.memory_mode=fixed")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Source.Config.String("dir"); got != "/data/my train" || p.Stages[1].Config.Int("size") != 32 ||
		!p.Source.Config.Bool("shuffle") || p.Resource.MemoryMode != memory.Fixed {
		t.Errorf("overrides: dir %q, batch %d, shuffle %v, memory %q", got, p.Stages[1].Config.Int("size"), p.Source.Config.Bool("shuffle"), p.Resource.MemoryMode)
	}
	for _, tc := range []struct{ override, want string }{
		{"batch.size=0", "size: 0 is out of range"},
		{"decode.colour=1", "colour"},
		{"resources.memory_mode=big", `"big" is not one of`},
		{"decode.random_resized_crop=64", "random resized crop"}, // with the file's center_crop
		{"novalue", "novalue"},
	} {
		if _, err := New("/d", tc.override); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v, want an error with %q", tc.override, err, tc.want)
		}
	}
}

func TestRunDeliversBatches(t *testing.T) {
	root := writeFolder(t, 21)
	tests := []struct {
		name      string
		overrides []string
		want      string // batch sizes in order
	}{
		{name: "all", want: "[8 8 5]"},
		{name: "limit", overrides: []string{"limit=10"}, want: "[8 2]"}, // exact: the last batch is cut
		{name: "two epochs", overrides: []string{"epochs=2"}, want: "[8 8 5 8 8 5]"},
		{name: "uma read buffers", overrides: []string{"read.read_buffers=4MiB"}, want: "[8 8 5]"},
		{name: "fixed", overrides: []string{"resources.memory_mode=fixed"}, want: "[8 8 5]"},
		{name: "fixed with pressure", overrides: []string{"resources.memory_mode=fixed", "resources.pressure=gate"}, want: "[8 8 5]"},
		{name: "elastic with pressure", overrides: []string{"resources.pressure=gate", "epochs=2"}, want: "[8 8 5 8 8 5]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := small(t, root, tt.overrides...)
			var mu sync.Mutex
			var sizes []int
			labels := map[int64]int{}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sum, err := pipelines.Run(ctx, p, pipelines.Hooks{Batches: func(_ context.Context, b *tensor.Batch) error {
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
			if sum.Items != int64(sumOf(sizes)) || sum.Batches != int64(len(sizes)) || sum.Peak <= 0 || sum.Peak > 1<<20 || sum.Elapsed <= 0 {
				t.Fatalf("summary %+v for batches %v", sum, sizes)
			}
			if p.Limit == 0 && (labels[0] == 0 || labels[1] == 0 || labels[-1] != 0) {
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
	_, err := pipelines.Run(context.Background(), small(t, root), pipelines.Hooks{
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
	if !strings.Contains(joined, "reader ") || !strings.Contains(joined, "JPEG decoder: ") {
		t.Fatalf("info lines %q", infos)
	}
}

// TestSkipBadImages: with on_error skip, every good image of every epoch is
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
		p := small(t, root, "epochs=2", fmt.Sprintf("decode.ordered=%v", ordered), "decode.on_error=skip")
		var mu sync.Mutex
		delivered := map[string]int{}
		skipped := map[string]int{}
		sum, err := pipelines.Run(context.Background(), p, pipelines.Hooks{
			Batches: func(_ context.Context, b *tensor.Batch) error {
				mu.Lock()
				defer mu.Unlock()
				for _, k := range b.Keys {
					delivered[k]++
				}
				return nil
			},
			Skipped: func(node string, err error) {
				mu.Lock()
				defer mu.Unlock()
				named := ""
				for name := range bad {
					if strings.Contains(err.Error(), filepath.Join(root, name)) {
						named = name
					}
				}
				if node != "decode" || named == "" {
					t.Errorf("skip by %s says %v: want the decode stage naming a bad file", node, err)
				}
				skipped[named]++
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
			if skipped[name] != 2 {
				t.Errorf("%s skipped %d times, want 2", name, skipped[name])
			}
		}
	}
	// the default stops at the first bad image and names it
	if _, err = pipelines.Run(context.Background(), small(t, root), pipelines.Hooks{}); err == nil || !strings.Contains(err.Error(), root) {
		t.Fatalf("stop policy: %v", err)
	}
	p := small(t, root, "decode.on_error=skip", "decode.max_skips=2")
	if _, err = pipelines.Run(context.Background(), p, pipelines.Hooks{Skipped: func(string, error) {}}); err == nil || !strings.Contains(err.Error(), "too many bad samples: 2 skipped already, the limit of 2 (decode.max_skips in the pipeline file") {
		t.Fatalf("max skips: %v", err)
	}
	if _, err := New(root, "decode.on_error=skip", "decode.max_skips=-1"); err == nil {
		t.Fatal("negative max_skips accepted")
	}
}

// TestEverySampleSkipped: skipping every sample of an epoch is an error, not an
// empty success.
func TestEverySampleSkipped(t *testing.T) {
	root := writeFolder(t, 5)
	p := small(t, root, "decode.on_error=skip", "decode.max_pixels=100", "decode.resize=8", "decode.center_crop=8")
	var n atomic.Int64
	_, err := pipelines.Run(context.Background(), p, pipelines.Hooks{Skipped: func(string, error) { n.Add(1) }})
	if err == nil || !strings.Contains(err.Error(), "every one of the 5 samples was skipped") || n.Load() != 5 {
		t.Fatalf("Run = %v after %d skips", err, n.Load())
	}
}

// TestBatchThatCannotFitIsRefused: the preset refuses at start, before any
// file is read, a resize whose one batch cannot fit in the budget it was given
// (a resize of 5000 in batches of 8 under 64 MiB held 2 GB), naming the keys
// and the numbers; a batch of large images that fits runs.
func TestBatchThatCannotFitIsRefused(t *testing.T) {
	root := writeFolder(t, 8)
	tests := []struct {
		name      string
		overrides []string
		want      []string // nil: runs
	}{
		{"resize 5000, batches of 8, 64 MiB", []string{"decode.resize=5000", "decode.center_crop=0", "resources.budget=64MiB", "batch.size=8"},
			[]string{"a batch of 8 (batch.size) samples of at least 5000×5000×3 uint8 values (decode.resize 5000 without a crop", "is at least 572.2 MiB, more than the budget of 64 MiB (resources.budget)",
				"raise resources.budget to at least 572.2 MiB"}},
		{"resize and crop 1000, batches of 8 (22.9 MiB), 64 MiB", []string{"decode.resize=1000", "decode.center_crop=1000", "resources.budget=64MiB", "batch.size=8"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := small(t, root, append(tt.overrides, "limit=8")...)
			sum, err := pipelines.Run(context.Background(), p, pipelines.Hooks{})
			if tt.want == nil {
				if err != nil || sum.Items != 8 {
					t.Fatalf("%d samples, %v; want 8", sum.Items, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ran, %d samples; want it refused", sum.Items)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
