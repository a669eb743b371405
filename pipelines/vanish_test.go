package pipelines

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/source/synth"
)

// TestFilesThatChangeAfterListing removes or cuts a file of an ImageFolder after
// the file list is taken and before it is read (in Hooks.Ready, once the first
// graph is built): under decode's on_error: stop the run ends with an error naming
// the file; under on_error: skip the file is named once, counted in
// Summary.Skipped, and every other sample arrives exactly once.
func TestFilesThatChangeAfterListing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(path string) error
		onError string
		want    string // in the error (stop) or the one skip named (skip)
	}{
		{"vanished/stop", os.Remove, "stop", "no such file or directory"},
		{"vanished/skip", os.Remove, "skip", "no such file or directory"},
		{"truncated/stop", func(p string) error { return os.Truncate(p, 300) }, "stop", "decode"},
		{"truncated/skip", func(p string) error { return os.Truncate(p, 300) }, "skip", "decode"},
		{"emptied/skip", func(p string) error { return os.Truncate(p, 0) }, "skip", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			im := synth.Image{Width: 60, Height: 40, Quality: 80}
			var paths []string
			for c := range 2 {
				ps, err := synth.JPEGFiles(filepath.Join(dir, fmt.Sprintf("c%d", c)), 6, im, uint64(c+1))
				if err != nil {
					t.Fatal(err)
				}
				paths = append(paths, ps...)
			}
			victim := paths[7]
			reg, rec := checkRegistry(t)
			file := `source: {kind: files, name: read, config: {dir: "` + dir + `"}}
stages:
  - {kind: decode, config: {label: folder, resize: 20, center_crop: 16, on_error: ` + tc.onError + `}}
  - {kind: batch, config: {size: 4}}
  - collate
sink: record
resources: {budget: 16MiB, pressure: off}
`
			p, err := Parse("f.yaml", []byte(file), Options{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			var named []string
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sum, err := Run(ctx, p, Hooks{
				Ready:   func() error { return tc.change(victim) },
				Skipped: func(node string, err error) { named = append(named, node+": "+err.Error()) },
			})
			for k, n := range rec.keys {
				if n != 1 {
					t.Errorf("%s delivered %d times", k, n)
				}
			}
			if rec.keys[victim] != 0 {
				t.Errorf("the changed file %s was delivered", victim)
			}
			if tc.onError == "stop" {
				if err == nil || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one naming %s (%s)", err, victim, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(named) != 1 || !strings.Contains(named[0], victim) || !strings.Contains(named[0], tc.want) {
				t.Fatalf("skips named %q, want %s once (%s)", named, victim, tc.want)
			}
			if sum.Skipped != 1 || sum.Items != int64(len(paths)-1) || len(rec.keys) != len(paths)-1 {
				t.Fatalf("skipped %d, %d samples, %d distinct keys; want 1, %d, %d", sum.Skipped, sum.Items, len(rec.keys), len(paths)-1, len(paths)-1)
			}
		})
	}
}
