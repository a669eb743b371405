package pipelines

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestBatchThatCannotFitIsRefused: a pipeline one of whose batches of decoded
// samples cannot fit in the byte budget it was given is refused at start,
// before anything is read, naming the keys and the numbers (as the
// front-end's user knows them); one that fits, one whose output size is not
// known before the run and one under the automatic budget run.
func TestBatchThatCannotFitIsRefused(t *testing.T) {
	flags := func(node, param string) string {
		return map[string]string{"batch.size": "-batch", "decode.center_crop": "-crop", "decode.resize": "-resize", "resources.budget": "-budget"}[node+"."+param]
	}
	tests := []struct {
		name   string
		decode string // the decode stage's config
		batch  int
		budget string // resources.budget ("" for auto)
		option func(node, param string) string
		want   []string // in the error; nil: the run delivers every sample
	}{
		{"a crop, uint8", "{resize: 256, center_crop: 224}", 64, "8MiB", nil,
			[]string{"one batch does not fit in the byte budget: a batch of 64 (batch.size) samples of 224×224×3 uint8 values (decode.center_crop 224; 147 KiB each) is 9.2 MiB, more than the budget of 8 MiB (resources.budget)",
				"Lower batch.size or decode.center_crop, or raise resources.budget to at least 9.2 MiB"}},
		{"a resize alone is at least its side squared", "{resize: 1000}", 2, "2MiB", nil,
			[]string{"a batch of 2 (batch.size) samples of at least 1000×1000×3 uint8 values (decode.resize 1000 without a crop: 1000 is the shorter side; 2.9 MiB each) is at least 5.7 MiB",
				"Lower batch.size or decode.resize, crop (decode.center_crop), or raise resources.budget to at least 5.7 MiB"}},
		{"normalised batches are float32", "{resize: 64, center_crop: 64, normalize: imagenet}", 64, "2MiB", nil,
			[]string{"samples of 64×64×3 float32 (decode.normalize imagenet) values", "is 3 MiB, more than the budget of 2 MiB"}},
		{"a named decode stage", "{resize: 64, center_crop: 64}, name: dec", 64, "512KiB", nil,
			[]string{"(dec.center_crop 64; 12 KiB each)", "Lower batch.size or dec.center_crop"}},
		{"the front-end's flags", "{resize: 256, center_crop: 224}", 64, "8MiB", flags,
			[]string{"a batch of 64 (-batch) samples", "(-crop 224;", "(-budget)", "Lower -batch or -crop, or raise -budget to at least 9.2 MiB"}},
		{"fits", "{resize: 16, center_crop: 16}", 8, "1MiB", nil, nil},
		{"just fits", "{resize: 32, center_crop: 32}", 8, "24KiB", nil, nil},
		{"the output size is not known before the run", "{}", 8, "1MiB", nil, nil},
		{"the automatic budget", "{resize: 512, center_crop: 512}", 8, "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := "resources: {pressure: off}\n"
			if tt.budget != "" {
				res = "resources: {budget: " + tt.budget + ", pressure: off}\n"
			}
			cfg, name := tt.decode, ""
			if i := strings.Index(cfg, ", name: "); i >= 0 {
				cfg, name = cfg[:i], ", name: "+cfg[i+len(", name: "):]
			}
			file := "source: {kind: generate, config: {items: 16, width: 64, height: 48, distinct: 2}}\nstages:\n" +
				"  - {kind: decode" + name + ", config: " + cfg + "}\n" +
				"  - {kind: batch, config: {size: " + strconv.Itoa(tt.batch) + "}}\n  - collate\nsink: discard\n" + res
			p, err := Parse("t.yaml", []byte(file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			ready := false
			sum, err := Run(context.Background(), p, Hooks{Option: tt.option, Ready: func() error { ready = true; return nil }})
			if tt.want == nil {
				if err != nil || sum.Items != 16 {
					t.Fatalf("%d samples, %v; want 16 and no error", sum.Items, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ran (%d samples); want it refused", sum.Items)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if ready || sum.Items != 0 {
				t.Errorf("refused after the start (Ready called %v, %d samples), want before anything is built", ready, sum.Items)
			}
		})
	}
}
