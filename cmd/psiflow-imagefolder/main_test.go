package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/reexec"

	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// envAsMain makes the test binary run main (a psiflow-imagefolder process the
// tests can signal).
const envAsMain = "PSIFLOW_IMAGEFOLDER_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	reexec.Init()
	if os.Getenv(envAsMain) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
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

func TestRunReportsBatches(t *testing.T) {
	root := writeFolder(t, 21)
	tests := []struct {
		name string
		args []string
		want []int
	}{
		{name: "all", want: []int{8, 8, 5}},
		{name: "limit", args: []string{"-limit", "10"}, want: []int{8, 2}}, // exactly the limit: the last batch is cut
		{name: "fixed, no gate", args: []string{"-memory", "fixed", "-pressure=false"}, want: []int{8, 8, 5}},
		{name: "elastic, no gate", args: []string{"-memory", "elastic", "-pressure=false"}, want: []int{8, 8, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			em := protocol.NewEmitter(&out)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := parseArgs(append([]string{"-data", root, "-batch", "8", "-workers", "2", "-budget", "1M", "-queue", "2", "-resize", "48", "-crop", "32", "-oom-victim=false"}, tt.args...))
			if err != nil {
				t.Fatal(err)
			}
			if err := run(ctx, c, em); err != nil {
				t.Fatal(err)
			}
			var got []int
			keys := map[string]bool{}
			epochs := 0
			sc := bufio.NewScanner(&out)
			for sc.Scan() {
				ev, ok, err := protocol.Parse(sc.Bytes())
				if !ok || err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				switch ev.Event {
				case protocol.Batch:
					got = append(got, ev.N)
					for _, k := range ev.Keys {
						if keys[k] {
							t.Errorf("key %s delivered twice", k)
						}
						keys[k] = true
					}
					if len(ev.Keys) != ev.N {
						t.Errorf("batch of %d with %d keys", ev.N, len(ev.Keys))
					}
				case protocol.Epoch:
					epochs++
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("batch sizes %v, want %v", got, tt.want)
			}
			if epochs != 1 {
				t.Errorf("%d epoch events, want 1", epochs)
			}
		})
	}
}

// TestOnErrorFlags: a folder with one bad file stops by default, naming it;
// with -on-error skip every good image is delivered.
func TestOnErrorFlags(t *testing.T) {
	root := writeFolder(t, 21)
	if err := os.WriteFile(filepath.Join(root, "class1", "bad.jpg"), []byte("not a jpeg"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"-data", root, "-batch", "8", "-workers", "2", "-budget", "1M", "-resize", "48", "-crop", "32"}
	for _, tt := range []struct {
		args  []string
		want  int
		error string
	}{
		{nil, 0, "bad.jpg"},
		{[]string{"-on-error", "skip"}, 21, ""},
		{[]string{"-on-error", "skip", "-max-skips", "1"}, 21, ""},
		{[]string{"-max-pixels", "3000"}, 0, "exceeds the limit of 3000 pixels"},
	} {
		c, err := parseArgs(append(append([]string{}, base...), tt.args...))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = run(ctx, c, protocol.NewEmitter(&out))
		cancel()
		if tt.error != "" {
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tt.error)) {
				t.Errorf("%q: %v, want an error with %q", tt.args, err, tt.error)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		n := 0
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			ev, ok, err := protocol.Parse(sc.Bytes())
			if ok && err == nil {
				n += ev.N
			}
		}
		if n != tt.want {
			t.Errorf("%q: %d samples, want %d", tt.args, n, tt.want)
		}
	}
}

func TestParseArgsRejects(t *testing.T) {
	tests := []struct {
		args    []string
		mention string
	}{
		{[]string{}, "-data is required"},
		{[]string{"-data", "x", "-backend", "gpu"}, "flag -backend"},
		{[]string{"-data", "x", "-budget", "9999999999G"}, "flag -budget"},
		{[]string{"-data", "x", "-budget", "NaN"}, "flag -budget"},
		{[]string{"-data", "x", "-budget", "-1M"}, "flag -budget"},
		{[]string{"-data", "x", "-workers", "-1"}, "flag -workers"},
		{[]string{"-data", "x", "-epochs", "0"}, "flag -epochs"},
		{[]string{"-data", "x", "-limit", "-1"}, "flag -limit"},
		{[]string{"-data", "x", "-limit", "1e3"}, "flag -limit"},
		{[]string{"-data", "x", "-crop", "100000"}, "flag -crop"},
		{[]string{"-data", "x", "-resize", "-1"}, "flag -resize"},
		{[]string{"-data", "x", "-batch", "99999999999999999999"}, "flag -batch"},
		{[]string{"-data", "x", "-queue", "0"}, "flag -queue"},
		{[]string{"-data", "x", "extra"}, "unexpected argument"},
		{[]string{"-data", "x", "-memory", "big"}, "flag -memory"},
		{[]string{"-data", "x", "-pressure=maybe"}, "-pressure"},
		{[]string{"-data", "x", "-on-error", "ignore"}, "flag -on-error"},
		{[]string{"-data", "x", "-on-error", "skip", "-max-skips", "-1"}, "flag -max-skips"},
		{[]string{"-data", "x", "-on-error", "skip", "-max-skip-rate", "NaN"}, "flag -max-skip-rate"},
		{[]string{"-data", "x", "-on-error", "skip", "-max-skip-rate", "1.5"}, "flag -max-skip-rate"},
		{[]string{"-data", "x", "-max-pixels", "-5"}, "flag -max-pixels"},
		{[]string{"-data", "x", "-below-floor", "wait"}, "flag -below-floor"},
		{[]string{"-data", "x", "-max-pixels", "0"}, "max_pixels 0"},
		{[]string{"-data", "x", "-max-skips", "3"}, "need on_error: skip"},
		{[]string{"-data", "x", "-random-resized-crop", "224", "-crop", "200"}, "random"},
		{[]string{"-data", "x", "-set", "decode.workerz=2"}, "workerz"},
	}
	for _, tt := range tests {
		_, err := parseArgs(tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("parseArgs(%q): %v, want an error mentioning %q", tt.args, err, tt.mention)
		}
	}
}

func TestParseArgsSizes(t *testing.T) {
	for in, want := range map[string]int64{"32M": 32 << 20, "1G": 1 << 30, "4096": 4096, "1.5M": 3 << 19, "64KiB": 64 << 10, "auto": 0} {
		c, err := parseArgs([]string{"-data", "x", "-budget", in})
		if err != nil || c.p.Resource.Budget != want {
			t.Errorf("-budget %s: %v; want %d", in, err, want)
			continue
		}
	}
}

// TestParseArgsDefaults: the defaults are the shipped pipeline file's, and
// every flag lands on its key.
func TestParseArgsDefaults(t *testing.T) {
	c, err := parseArgs([]string{"-data", "x"})
	if err != nil {
		t.Fatal(err)
	}
	r := c.p.Resource
	if r.MemoryMode != "elastic" || !r.Pressure || r.Budget != 0 || r.BelowFloor != "pause" {
		t.Fatalf("defaults: memory %q pressure %v budget %d below floor %q; want elastic, true, 0 (auto), pause", r.MemoryMode, r.Pressure, r.Budget, r.BelowFloor)
	}
	if !c.process.LockText || !c.process.OOMVictim || !c.process.GoMemoryLimit {
		t.Errorf("process actions %+v: want all on in the launcher", c.process)
	}
	c, err = parseArgs([]string{"-data", "x", "-memory", "fixed", "-pressure=false", "-budget", "8M", "-oom-victim=false", "-shuffle", "-seed", "7"})
	if err != nil {
		t.Fatal(err)
	}
	r = c.p.Resource
	if r.MemoryMode != "fixed" || r.Pressure || r.Budget != 8<<20 || c.process.OOMVictim {
		t.Fatalf("fixed: memory %q pressure %v budget %d oom victim %v", r.MemoryMode, r.Pressure, r.Budget, c.process.OOMVictim)
	}
	if !c.p.Source.Config.Bool("shuffle") || c.p.Source.Config.Int("seed") != 7 || c.p.Stages[0].Config.Int("seed") != 7 {
		t.Errorf("-shuffle -seed 7: source shuffle %v seed %d, decode seed %d", c.p.Source.Config.Bool("shuffle"), c.p.Source.Config.Int("seed"), c.p.Stages[0].Config.Int("seed"))
	}
}

// TestBatchOverBudgetRefused: a resize whose one batch cannot fit in -budget
// is refused at start, before anything is read, naming the flags and the
// numbers; the same resize in smaller batches runs.
func TestBatchOverBudgetRefused(t *testing.T) {
	root := writeFolder(t, 4)
	tests := []struct {
		name string
		args []string
		want []string // nil: runs
	}{
		{"resize 5000, batches of 8, 64 MiB", []string{"-resize", "5000", "-crop", "0", "-budget", "64MiB", "-batch", "8"},
			[]string{"one batch does not fit in the byte budget: a batch of 8 (-batch) samples of at least 5000×5000×3 uint8 values (-resize 5000 without a crop",
				"more than the budget of 64 MiB (-budget)", "Lower -batch or -resize, crop (-crop), or raise -budget to at least 572.2 MiB"}},
		{"resize and crop 512, batches of 4, 64 MiB", []string{"-resize", "512", "-crop", "512", "-budget", "64MiB", "-batch", "4"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			em := protocol.NewEmitter(&out)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := parseArgs(append([]string{"-data", root, "-workers", "2", "-pressure=false", "-oom-victim=false"}, tt.args...))
			if err != nil {
				t.Fatal(err)
			}
			err = run(ctx, c, em)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("ran; want it refused")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(out.String(), `"event":"batch"`) {
				t.Errorf("batches were delivered before the refusal:\n%s", out.String())
			}
		})
	}
}
