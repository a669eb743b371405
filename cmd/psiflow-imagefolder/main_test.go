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
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
		{name: "limit", args: []string{"-limit", "10"}, want: []int{8, 8}},
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
			sc := bufio.NewScanner(&out)
			for sc.Scan() {
				ev, ok, err := protocol.Parse(sc.Bytes())
				if !ok || err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				got = append(got, ev.N)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("batch sizes %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseArgsRejects(t *testing.T) {
	for _, args := range [][]string{{}, {"-data", "x", "-backend", "gpu"}, {"-data", "x", "-budget", "0"}, {"-data", "x", "-workers", "0"}, {"-data", "x", "-epochs", "0"}, {"-data", "x", "-limit", "-1"}, {"-data", "x", "-memory", "big"}, {"-data", "x", "-pressure=maybe"}} {
		if _, err := parseArgs(args); err == nil {
			t.Errorf("parseArgs(%q) accepted", args)
		}
	}
}

func TestParseArgsMemory(t *testing.T) {
	c, err := parseArgs([]string{"-data", "x"})
	if err != nil || c.Memory != "elastic" || !c.Pressure || c.Budget != 32<<20 {
		t.Fatalf("defaults: memory %q pressure %v budget %d (%v); want elastic, true, 32 MiB", c.Memory, c.Pressure, c.Budget, err)
	}
	c, err = parseArgs([]string{"-data", "x", "-memory", "fixed", "-pressure=false"})
	if err != nil || c.Memory != "fixed" || c.Pressure || c.Budget <= 0 || c.Budget == 32<<20 {
		t.Fatalf("fixed: memory %q pressure %v budget %d (%v); want fixed, false, a quarter of the limit", c.Memory, c.Pressure, c.Budget, err)
	}
	c, err = parseArgs([]string{"-data", "x", "-memory", "fixed", "-budget", "8M"})
	if err != nil || c.Budget != 8<<20 {
		t.Fatalf("fixed with -budget 8M: budget %d (%v)", c.Budget, err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"32M": 32 << 20, "1G": 1 << 30, "4096": 4096, "0": -1, "x": -1, "-1M": -1} {
		got, err := parseSize(in)
		if (want < 0) != (err != nil) || (err == nil && got != want) {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
