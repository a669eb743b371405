package flowsrc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/reexec"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/readfault"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/stage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	reexec.Init()
	goleak.VerifyTestMain(m)
}

func TestFilesThroughGraph(t *testing.T) {
	dir := t.TempDir()
	paths, err := synth.JPEGFiles(dir, 40, synth.Image{Width: 64, Height: 48}, 3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		budget int64
		cancel bool
	}{
		{"roomy-budget", 64 << 20, false},
		{"tight-budget", 16 << 10, false}, // about one sample at a time
		{"cancelled", 64 << 20, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := flow.New(tc.name, flow.WithBudget(tc.budget))
			src := Files(g, "read", source.NewFiles(paths), source.Options{WorldSize: 1, Workers: 2})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var n int
			flow.Sink(src, "check", func(ctx context.Context, s *source.Sample) error {
				want, err := os.ReadFile(s.Key)
				if err != nil {
					return err
				}
				if !bytes.Equal(want, s.Field("jpg")) {
					t.Errorf("%s: bytes differ", s.Key)
				}
				if g.Budget().InUse() < s.Len() {
					t.Errorf("budget in use %d < sample %d bytes", g.Budget().InUse(), s.Len())
				}
				n++
				if tc.cancel && n == 5 {
					cancel()
				}
				return nil
			})
			err := g.Run(ctx)
			if tc.cancel {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("run after cancel: %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if n != len(paths) {
				t.Fatalf("%d samples, want %d", n, len(paths))
			}
			if u := g.Budget().InUse(); u != 0 {
				t.Fatalf("budget in use after run: %d", u)
			}
		})
	}
}

func TestTarAndTablesThroughGraph(t *testing.T) {
	dir := t.TempDir()
	shards, err := synth.TarShards(dir+"/tar", synth.Shards{Shards: 2, Samples: 5, Image: synth.Image{Width: 32, Height: 32}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := synth.ParquetFiles(dir+"/pq", synth.Table{Files: 2, Batches: 3, Rows: 4, PayloadBytes: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := flow.New("mixed", flow.WithBudget(8<<20))
	samples := Tar(g, "tar", source.NewTar(shards), source.Options{WorldSize: 1})
	batches := Tables(g, "parquet", source.NewParquet(pq, "id"), source.Options{WorldSize: 1})
	var ns, nb, rows int
	flow.Sink(samples, "samples", func(ctx context.Context, s *source.Sample) error {
		if len(s.Fields) != 3 {
			t.Errorf("sample %s has %d fields", s.Key, len(s.Fields))
		}
		ns++
		return nil
	})
	flow.Sink(batches, "batches", func(ctx context.Context, b *source.Batch) error {
		if b.Record.NumCols() != 1 {
			t.Errorf("projection kept %d columns", b.Record.NumCols())
		}
		nb++
		rows += int(b.Record.NumRows())
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ns != 10 || nb != 6 || rows != 24 {
		t.Fatalf("samples %d batches %d rows %d", ns, nb, rows)
	}
	if u := g.Budget().InUse(); u != 0 {
		t.Fatalf("budget in use after run: %d", u)
	}
}

func TestBadInputFailsGraph(t *testing.T) {
	g := flow.New("bad")
	src := Files(g, "read", source.NewFiles([]string{"/nonexistent/psiflow/x.jpg"}), source.Options{WorldSize: 1})
	flow.Sink(src, "drop", func(context.Context, *source.Sample) error { return nil })
	err := g.Run(context.Background())
	var re *source.ReadError
	if !errors.As(err, &re) || re.Path != "/nonexistent/psiflow/x.jpg" {
		t.Fatalf("run: %v", err)
	}
}

// TestSkipsCountInTheSourceStage: with Skip, a shard cut in the middle of a member
// loses its rest; the graph's source stage counts the skip (Skipped, and so
// psiflow_stage_skipped_total) and the caller's OnSkip names it, while every other
// sample arrives.
func TestSkipsCountInTheSourceStage(t *testing.T) {
	dir := t.TempDir()
	shards, err := synth.TarShards(dir, synth.Shards{Shards: 3, Samples: 10, Image: synth.Image{Width: 32, Height: 32}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(shards[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(shards[1], st.Size()/2+100); err != nil { // inside a member
		t.Fatal(err)
	}
	var named []error
	g := flow.New("skips")
	src := Tar(g, "shards", source.NewTar(shards), source.Options{WorldSize: 1, Skip: true, OnSkip: func(err error) { named = append(named, err) }})
	n := 0
	flow.Sink(src, "count", func(context.Context, *source.Sample) error { n++; return nil })
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var skipped int64
	for _, s := range g.Stats() {
		if s.Name == "shards" {
			skipped = s.Skipped
		}
	}
	var sk *source.Skipped
	if skipped != 1 || len(named) != 1 || !errors.As(named[0], &sk) || sk.Path != shards[1] || sk.What == "" {
		t.Fatalf("stage skipped %d, named %v", skipped, named)
	}
	if n < 20 || n >= 30 {
		t.Fatalf("%d samples, want the 20 of the whole shards and the whole ones before the cut", n)
	}
}

// TestReadErrorsUnderTheSkipPolicy: under the decode stage's skip policy a
// file that fails to read (EIO mid-file, injected) is skipped, named through
// the policy's Log and counted in the source stage; every other file arrives
// once.
func TestReadErrorsUnderTheSkipPolicy(t *testing.T) {
	dir := t.TempDir()
	paths, err := synth.JPEGFiles(dir, 12, synth.Image{Width: 64, Height: 48}, 3)
	if err != nil {
		t.Fatal(err)
	}
	bad := paths[5]
	in := readfault.New(readfault.EIO(filepath.Base(bad), 512))
	var logged []string
	g := flow.New("read-errors")
	src := Files(g, "read", source.NewFiles(paths), source.Options{WorldSize: 1,
		Reader:     source.ReaderOptions{Faults: in},
		SkipPolicy: stage.SkipPolicy{OnError: stage.Skip, Log: func(key string, err error) { logged = append(logged, key+": "+err.Error()) }},
	})
	seen := map[string]int{}
	flow.Sink(src, "count", func(_ context.Context, s *source.Sample) error { seen[s.Key]++; return nil })
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if want := map[bool]int{true: 0, false: 1}[p == bad]; seen[p] != want {
			t.Errorf("%s delivered %d times, want %d", p, seen[p], want)
		}
	}
	var skipped int64
	for _, s := range g.Stats() {
		if s.Name == "read" {
			skipped = s.Skipped
		}
	}
	if skipped != 1 || len(logged) != 1 || !strings.HasPrefix(logged[0], bad+": ") || !strings.Contains(logged[0], "offset 512") {
		t.Fatalf("stage skipped %d, logged %q; want %s named once with its offset", skipped, logged, bad)
	}
}
