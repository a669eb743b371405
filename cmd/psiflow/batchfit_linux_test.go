package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBatchOverBudgetRefusedByEveryCommand: each front-end that builds the
// image pipeline (a pipeline file or -set overrides through psiflow run, the
// demo and serve flags) refuses at start a resize whose one batch cannot fit
// in the budget (a resize of 5000 in batches of 8 under 64 MiB held 2 GB of
// RSS), naming the keys as its user knows them and the numbers; serve makes no
// socket.
func TestBatchOverBudgetRefusedByEveryCommand(t *testing.T) {
	data := genFolder(t, 4)
	file := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(file, []byte(`source: {kind: files, name: read, config: {dir: "`+data+`"}}
stages:
  - {kind: decode, name: dec, config: {resize: 5000}}
  - {kind: batch, config: {size: 8}}
  - collate
sink: discard
resources: {budget: 64MiB}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	const numbers = "samples of at least 5000×5000×3 uint8 values"
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"run -set imagefolder", []string{"run", "-every", "0", "-set", "read.dir=" + data, "-set", "decode.resize=5000", "-set", "decode.center_crop=0",
			"-set", "resources.budget=64MiB", "-set", "batch.size=8", "imagefolder"},
			[]string{"psiflow run: pipeline imagefolder: one batch does not fit in the byte budget: a batch of 8 (batch.size) " + numbers, "(decode.resize 5000 without a crop",
				"is at least 572.2 MiB, more than the budget of 64 MiB (resources.budget)", "Lower batch.size or decode.resize, crop (decode.center_crop), or raise resources.budget to at least 572.2 MiB"}},
		{"run FILE", []string{"run", "-every", "0", file},
			[]string{"a batch of 8 (batch.size) " + numbers, "(dec.resize 5000 without a crop", "Lower batch.size or dec.resize, crop (dec.center_crop)"}},
		{"demo -data", []string{"demo", "-data", data, "-resize", "5000", "-crop", "0", "-budget", "64MiB", "-batch", "8"},
			[]string{"psiflow demo: pipeline imagefolder: one batch does not fit in the byte budget: a batch of 8 (-batch) " + numbers, "(-resize 5000 without a crop",
				"more than the budget of 64 MiB (-budget)", "Lower -batch or -resize, crop (-crop), or raise -budget to at least 572.2 MiB"}},
		{"serve", []string{"serve", "-data", data, "-socket", sock, "-accept-timeout", "10m", "-resize", "5000", "-crop", "0", "-budget", "64MiB", "-batch", "8"},
			[]string{"a batch of 8 (-batch) " + numbers, "(-budget)", "Lower -batch or -resize, crop (-crop)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out, errOut bytes.Buffer
			code := dispatch(ctx, &out, &errOut, tt.args)
			if ctx.Err() != nil {
				t.Fatalf("still running after 2 minutes:\n%s%s", out.String(), errOut.String())
			}
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
			if strings.Contains(out.String(), "samples in") && !strings.Contains(out.String(), "0 samples in") {
				t.Errorf("samples were delivered before the refusal:\n%s", out.String())
			}
			if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("serve made its socket before refusing (%v)", err)
			}
		})
	}
}
