package imagefolder_test

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
)

// Example_readme is the README's Go pipeline ("Writing a pipeline in Go"),
// compiled and run over 10 generated images: TestReadmeGoPipeline checks that
// the README shows exactly the lines between "README begin" and "README end".
func Example_readme() {
	dir, err := readmeFolder(10)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	seen := 0
	step := func(t tensor.Tensor) error { seen += t.Shape[0]; return nil } // the training step
	defer func(r prometheus.Registerer) { prometheus.DefaultRegisterer = r }(prometheus.DefaultRegisterer)
	prometheus.DefaultRegisterer = prometheus.NewRegistry() // a fresh one per run of the example
	// README begin
	// The memory runtime: a quarter of this cgroup's memory limit in flight, the gate on its memory pressure.
	rt, err := memory.New(memory.Config{Mode: memory.Fixed, Pressure: true, Workers: runtime.NumCPU()})
	g := flow.New("train", flow.WithRuntime(rt), flow.WithRegistry(prometheus.DefaultRegisterer))

	files, err := source.Dir(dir, ".JPEG")                                             // dir: an ImageFolder root such as /data/imagenet/train
	samples := flowsrc.Files(g, "read", files, source.Options{Shuffle: true, Seed: 1}) // io_uring (pread fallback); Rank/WorldSize shard it
	dec, err := decode.NewDecoder(decode.Options{})                                    // libjpeg-turbo, loaded at run time
	decoder, err := decode.NewStage("decode", dec, decode.StageConfig{
		Workers:   runtime.NumCPU(),
		Transform: decode.Transform{Resize: 256, CenterCrop: 224, Layout: tensor.CHW},
	}, func(s *source.Sample) decode.Encoded { return decode.Encoded{Key: s.Key, Data: s.Fields[0].Data} })
	images := flow.Via(samples, decoder) // *source.Sample → *tensor.Sample
	batches := flow.Via(flow.Batch(images, "batch", 64, 0), tensor.Collate("collate"))
	flow.Sink(batches, "train", func(ctx context.Context, b *tensor.Batch) error { return step(b.Tensor) })

	err = g.Run(ctx) // first error cancels everything and names its stage; all goroutines have ended
	// README end
	dec.Close()
	rt.Close()
	fmt.Println(seen, "samples trained on;", err)
	// Output: 10 samples trained on; <nil>
}

// readmeFolder writes n small .JPEG files in two class folders of a new
// temporary folder.
func readmeFolder(n int) (string, error) {
	dir, err := os.MkdirTemp("", "readme")
	if err != nil {
		return "", err
	}
	for i := range n {
		class := filepath.Join(dir, fmt.Sprintf("n%08d", i%2))
		if err := os.MkdirAll(class, 0o755); err != nil {
			return "", err
		}
		m := image.NewRGBA(image.Rect(0, 0, 300, 260))
		for y := range 260 {
			for x := range 300 {
				m.Set(x, y, color.RGBA{uint8(x + i), uint8(y), 80, 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, nil); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(class, fmt.Sprintf("%d.JPEG", i)), b.Bytes(), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// TestReadmeGoPipeline: the README's Go pipeline is Example_readme's, line for
// line (indentation aside), so it compiles and runs.
func TestReadmeGoPipeline(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Writing a pipeline in Go")
	_, block, ok2 := strings.Cut(after, "```go\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README: no ```go block under \"## Writing a pipeline in Go\"")
	}
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(src), "// README begin\n")
	code, _, _ = strings.Cut(code, "\t// README end")
	norm := func(s string) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		return out
	}
	got, want := norm(block), norm(code)
	if len(got) != len(want) {
		t.Fatalf("README's Go pipeline has %d lines, Example_readme %d:\nREADME:\n%s\nExample:\n%s", len(got), len(want), block, code)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("line %d differs:\nREADME:  %s\nExample: %s", i+1, got[i], want[i])
		}
	}
}

// TestReadmeIdentifiers counts what the README's Go pipeline asks its author to
// know (docs/AUTHORING.md): the distinct exported identifiers of psiflow's
// packages it names (pkg.Name, and the graph's Run), and those packages. It
// fails when the count grows past the figure the doc gives.
func TestReadmeIdentifiers(t *testing.T) {
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(src), "// README begin\n")
	code, _, _ = strings.Cut(code, "\t// README end")
	f, err := parser.ParseFile(token.NewFileSet(), "readme.go", "package p\nfunc f() {\n"+code+"}\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	psiflow := map[string]bool{"memory": true, "flow": true, "source": true, "flowsrc": true, "decode": true, "tensor": true}
	idents, pkgs := map[string]bool{}, map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok {
				switch {
				case psiflow[x.Name]:
					idents[x.Name+"."+sel.Sel.Name], pkgs[x.Name] = true, true
				case x.Name == "g" && sel.Sel.Name == "Run":
					idents["Graph.Run"] = true
				}
			}
		}
		return true
	})
	names := make([]string, 0, len(idents))
	for n := range idents {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("%d identifiers from %d packages: %s", len(names), len(pkgs), strings.Join(names, ", "))
	const maxIdents, maxPkgs = 23, 6 // docs/AUTHORING.md
	if len(names) > maxIdents || len(pkgs) > maxPkgs {
		t.Errorf("the README's Go pipeline names %d identifiers from %d packages; docs/AUTHORING.md says %d from %d", len(names), len(pkgs), maxIdents, maxPkgs)
	}
}
