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
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
)

// Example_readme is the README's Go pipeline with the preset ("Writing a
// pipeline in Go", its first block), compiled and run over 10 generated
// images: TestReadmeGoPipeline checks that the README shows exactly the lines
// between "README begin: preset" and "README end: preset".
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
	// README begin: preset
	p, err := imagefolder.New(dir, "read.shuffle=true") // dir: an ImageFolder root such as /data/imagenet/train
	if err != nil {
		log.Fatal(err)
	}
	sum, err := pipelines.Run(ctx, p, pipelines.Hooks{
		Batches: func(ctx context.Context, b *tensor.Batch) error { return step(b.Tensor) }, // [64, 3, 224, 224] uint8, b.Labels
	})
	// README end: preset
	fmt.Println(seen, "samples trained on;", sum.Items, "delivered;", err)
	// Output: 10 samples trained on; 10 delivered; <nil>
}

// Example_readmeByHand is the README's second Go block: the same image
// pipeline written by hand with package flow, compiled and run over 10
// generated images (TestReadmeGoPipeline checks the README's copy).
func Example_readmeByHand() {
	dir, err := readmeFolder(10)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	seen := 0
	step := func(t tensor.Tensor) error { seen += t.Shape[0]; return nil } // the training step
	// README begin: by hand
	files, err := source.Dir(dir, ".JPEG") // dir: an ImageFolder root such as /data/imagenet/train
	if err != nil {
		log.Fatal(err)
	}
	// A graph under a memory runtime of its own, which its Run closes: a quarter of this cgroup's memory limit in flight, the gate on its memory pressure.
	g, err := memory.NewGraph("train", memory.Config{Mode: memory.Fixed, Pressure: true})
	if err != nil {
		log.Fatal(err)
	}

	// Read through io_uring (pread where unavailable); Rank and WorldSize shard the files.
	samples := flowsrc.Files(g, "read", files, source.Options{Shuffle: true, Seed: 1})
	// libjpeg-turbo (loaded at run time) on GOMAXPROCS workers, each image's bytes reserved from the budget first.
	images := decode.Images(samples, "decode", decode.Transform{Resize: 256, CenterCrop: 224, Layout: tensor.CHW})
	batches := flow.Via(images, tensor.Batches("batch", 64)) // batch and collate: [64, 3, 224, 224] uint8
	flow.Sink(batches, "train", func(ctx context.Context, b *tensor.Batch) error { return step(b.Tensor) })

	err = g.Run(ctx) // first error cancels everything and names its stage; all goroutines have ended
	// README end: by hand
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

// readmeBlocks are the Go code blocks of the README's "Writing a pipeline in
// Go" section, in order.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Writing a pipeline in Go\n")
	if !ok {
		t.Fatal(`README: no "## Writing a pipeline in Go"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for {
		var block string
		var found bool
		if _, section, found = strings.Cut(section, "```go\n"); !found {
			return blocks
		}
		if block, section, found = strings.Cut(section, "```"); !found {
			t.Fatal("README: a ```go block under \"## Writing a pipeline in Go\" does not end")
		}
		blocks = append(blocks, block)
	}
}

// exampleCode is the code of this file between "README begin: name" and
// "README end: name".
func exampleCode(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, ok := strings.Cut(string(src), "// README begin: "+name+"\n")
	code, _, ok2 := strings.Cut(code, "\t// README end: "+name)
	if !ok || !ok2 {
		t.Fatalf("readme_example_test.go: no README begin/end: %s", name)
	}
	return code
}

// readmeExamples are the README's compiled Go blocks, in the README's order.
var readmeExamples = []string{"preset", "by hand"}

// TestReadmeGoPipeline: the README's Go pipelines are Example_readme's and
// Example_readmeByHand's, line for line (indentation aside), so they compile
// and run.
func TestReadmeGoPipeline(t *testing.T) {
	blocks := readmeBlocks(t)
	if len(blocks) < len(readmeExamples) {
		t.Fatalf("README: %d ```go blocks under \"## Writing a pipeline in Go\", want at least %d (%q)", len(blocks), len(readmeExamples), readmeExamples)
	}
	norm := func(s string) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		return out
	}
	for i, name := range readmeExamples {
		block, code := blocks[i], exampleCode(t, name)
		got, want := norm(block), norm(code)
		if len(got) != len(want) {
			t.Errorf("README's Go block %d (%s) has %d lines, the example %d:\nREADME:\n%s\nExample:\n%s", i+1, name, len(got), len(want), block, code)
			continue
		}
		for j := range got {
			if got[j] != want[j] {
				t.Errorf("block %d (%s), line %d differs:\nREADME:  %s\nExample: %s", i+1, name, j+1, got[j], want[j])
			}
		}
	}
}

// TestReadmeIdentifiers counts what the README's Go pipelines ask their author
// to know (docs/AUTHORING.md): the distinct exported identifiers of psiflow's
// packages each names (pkg.Name, and the graph's Run), and those packages. It
// fails when a count grows past the figure the doc gives.
func TestReadmeIdentifiers(t *testing.T) {
	psiflow := map[string]bool{"imagefolder": true, "pipelines": true, "memory": true, "flow": true, "source": true,
		"flowsrc": true, "decode": true, "tensor": true}
	for _, tc := range []struct {
		name              string
		maxIdents, maxPkg int // docs/AUTHORING.md
	}{
		{"preset", 4, 3},
		{"by hand", 14, 6},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "readme.go", "package p\nfunc f() {\n"+exampleCode(t, tc.name)+"}\n", 0)
		if err != nil {
			t.Fatal(err)
		}
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
		t.Logf("%s: %d identifiers from %d packages: %s", tc.name, len(names), len(pkgs), strings.Join(names, ", "))
		if len(names) > tc.maxIdents || len(pkgs) > tc.maxPkg {
			t.Errorf("the README's Go pipeline (%s) names %d identifiers from %d packages; docs/AUTHORING.md says %d from %d", tc.name, len(names), len(pkgs), tc.maxIdents, tc.maxPkg)
		}
	}
}
