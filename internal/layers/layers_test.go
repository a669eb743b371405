package layers

import (
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// architecture is the module's layers, lowest first. A package may import packages
// of lower layers and of its own component; it may not import a higher layer, nor a
// sibling component of its own layer (siblings stay independent of each other).
// Patterns are module-relative: "x" is package x alone, "x/..." is x and every
// package below it; the longest matching pattern places a package, so a new
// package under a listed tree is placed without editing this table, and a new tree
// fails the test until it is given a layer here.
var architecture = []layer{
	{"kernel file parsers", []component{
		{"kernfile", []string{"internal/kernfile"}},
	}},
	{"leaves", []component{
		{"bytesize", []string{"internal/bytesize"}},
		{"protocol", []string{"internal/harness/protocol"}},
		{"kerneltest", []string{"internal/kerneltest"}},
		{"uring", []string{"internal/uring"}},
		{"turbojpeg", []string{"stage/decode/turbojpeg"}},
		{"synth", []string{"source/synth"}},
		{"pkgtest", []string{"python/pkgtest"}},
		{"layers", []string{"internal/layers"}},
		{"docscheck", []string{"internal/docscheck"}},
	}},
	{"process helpers", []component{
		{"addrspace", []string{"internal/addrspace"}},
		{"flagval", []string{"internal/flagval"}},
		{"stuckfs", []string{"internal/stuckfs"}},
		{"stopsig", []string{"internal/stopsig"}},
		{"cheap", []string{"internal/cheap"}},
		{"fakecuda", []string{"internal/fakecuda"}},
	}},
	// uma and cgroup are siblings: UMA takes its limit from its caller and knows no
	// cgroup; cgroup knows no buffers.
	{"kernel resources: know no graph", []component{
		{"uma", []string{"uma/..."}},
		{"cgroup", []string{"cgroup/..."}},
	}},
	{"pressure: knows no graph", []component{
		{"pressure", []string{"pressure/..."}},
	}},
	{"graph contract", []component{
		{"stage", []string{"stage"}},
	}},
	{"tensors and batches", []component{
		{"tensor", []string{"tensor/..."}},
	}},
	{"graphs", []component{
		{"flow", []string{"flow/..."}},
	}},
	// A sink never imports a decoder, a source never imports a sink.
	{"components", []component{
		{"source", []string{"source/..."}},
		{"sink", []string{"sink/..."}},
		{"decode", []string{"stage/decode/..."}},
		{"gpu", []string{"gpu/..."}},
		{"progress", []string{"pipelines/progress"}},
	}},
	{"memory runtime", []component{
		{"memory", []string{"memory/..."}},
		{"metrics", []string{"metrics"}},
	}},
	{"pipeline engine", []component{
		{"pipelines", []string{"pipelines"}},
	}},
	{"presets", []component{
		{"imagefolder", []string{"pipelines/imagefolder"}},
	}},
	{"front-end libraries", []component{
		{"demo", []string{"internal/demo"}},
		{"frontend", []string{"internal/frontend"}},
		{"harness", []string{"internal/harness"}},
		{"reexec", []string{"reexec"}},
	}},
	{"commands", []component{
		{"cmd", []string{"cmd/..."}},
	}},
}

// layer is one level of the architecture.
type layer struct {
	name       string
	components []component
}

// component is a group of packages that may import each other.
type component struct {
	name     string
	patterns []string
}

// pkg is what the test knows of one package: its non-test files' imports of the
// module's own packages, its package name and its init functions.
type pkg struct {
	name    string              // the package clause
	imports map[string][]string // module-relative import -> files importing it
	inits   []string            // files declaring func init
	doc     bool                // some file has a package doc comment
}

// place returns the layer and component of a module-relative package path, by the
// longest matching pattern, and the pattern.
func place(arch []layer, path string) (li int, comp, pattern string, ok bool) {
	best := -1
	for i, l := range arch {
		for _, c := range l.components {
			for _, p := range c.patterns {
				tree, isTree := strings.CutSuffix(p, "/...")
				match := path == p || isTree && (path == tree || strings.HasPrefix(path, tree+"/"))
				if match && len(p) > best {
					best, li, comp, pattern, ok = len(p), i, c.name, p, true
				}
			}
		}
	}
	return li, comp, pattern, ok
}

// check returns every breach of arch by pkgs (keyed by module-relative path), sorted.
func check(pkgs map[string]*pkg, arch []layer) []string {
	var out []string
	used := map[string]bool{}
	for _, path := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[path]
		if p.name == "main" && path != "cmd" && !strings.HasPrefix(path, "cmd/") {
			out = append(out, fmt.Sprintf("%s: package main outside cmd/", path))
		}
		if p.name != "main" && len(p.inits) > 0 {
			out = append(out, fmt.Sprintf("%s: library package with func init in %s: make it an explicit call from main or TestMain", path, strings.Join(p.inits, ", ")))
		}
		if !p.doc {
			out = append(out, fmt.Sprintf("%s: no package doc comment (a doc.go saying what it owns and what it does not)", path))
		}
		li, comp, pat, ok := place(arch, path)
		if !ok {
			out = append(out, fmt.Sprintf("%s: in no layer; give it one in internal/layers/layers_test.go", path))
			continue
		}
		used[pat] = true
		for _, imp := range slices.Sorted(maps.Keys(p.imports)) {
			files := strings.Join(p.imports[imp], ", ")
			lj, icomp, _, ok := place(arch, imp)
			switch {
			case !ok:
				// Reported once, as the imported package's own "in no layer".
			case lj > li:
				out = append(out, fmt.Sprintf("%s (layer %q) imports %s of the higher layer %q (%s)", path, arch[li].name, imp, arch[lj].name, files))
			case lj == li && icomp != comp:
				out = append(out, fmt.Sprintf("%s (component %s) imports %s of its sibling component %s in layer %q (%s)", path, comp, imp, icomp, arch[li].name, files))
			}
		}
	}
	for _, l := range arch {
		for _, c := range l.components {
			for _, p := range c.patterns {
				if !used[p] {
					out = append(out, fmt.Sprintf("pattern %q of component %s matches no package: remove it", p, c.name))
				}
			}
		}
	}
	return out
}

// load parses the non-test Go files of the module at root (every GOOS and
// architecture: a breach in a file built only elsewhere is still a breach) and
// returns its packages keyed by module-relative path.
func load(root string) (map[string]*pkg, error) {
	mod, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root && exists(filepath.Join(path, "go.mod")) {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ignored(f) {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		p := pkgs[rel]
		if p == nil {
			p = &pkg{name: f.Name.Name, imports: map[string][]string{}}
			pkgs[rel] = p
		}
		p.doc = p.doc || f.Doc != nil
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", path, is.Path.Value, err)
			}
			if r, ok := strings.CutPrefix(ip, mod+"/"); ok {
				p.imports[r] = append(p.imports[r], name)
			}
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
				p.inits = append(p.inits, name)
			}
		}
		return nil
	})
	return pkgs, err
}

// ignored reports whether a file is excluded from every build: its build line names
// the tag "ignore" and is false with "ignore" off and every other tag on.
func ignored(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err != nil {
				continue
			}
			names := false
			on := expr.Eval(func(tag string) bool {
				names = names || tag == "ignore"
				return tag != "ignore"
			})
			return names && !on
		}
	}
	return false
}

func modulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestImportLayers checks the module against architecture.
func TestImportLayers(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("found only %d packages under %s: wrong root?", len(pkgs), root)
	}
	edges := 0
	for _, p := range pkgs {
		edges += len(p.imports)
	}
	for _, problem := range check(pkgs, architecture) {
		t.Error(problem)
	}
	t.Logf("%d packages, %d imports between them", len(pkgs), edges)
}

// TestCheck shows that check finds each kind of breach, on made-up modules.
func TestCheck(t *testing.T) {
	arch := []layer{
		{"low", []component{{"a", []string{"a"}}, {"b", []string{"b/..."}}}},
		{"mid", []component{{"c", []string{"c/..."}}}},
		{"top", []component{{"cmd", []string{"cmd/..."}}}},
	}
	lib := func(imports ...string) *pkg {
		p := &pkg{name: "lib", imports: map[string][]string{}, doc: true}
		for _, i := range imports {
			p.imports[i] = []string{"x.go"}
		}
		return p
	}
	clean := func() map[string]*pkg {
		return map[string]*pkg{
			"a":        lib(),
			"b":        lib(),
			"b/inner":  lib("b", "b/deeper"),
			"b/deeper": lib(),
			"c":        lib("a", "b/inner"),
			"c/sub":    lib("c", "a"),
			"cmd/tool": {name: "main", imports: map[string][]string{"c": {"main.go"}}, inits: []string{"main.go"}, doc: true},
		}
	}
	tests := []struct {
		name   string
		change func(map[string]*pkg)
		want   []string // substrings, one per expected problem, in order
	}{
		{"clean", func(map[string]*pkg) {}, nil},
		{"backward import", func(m map[string]*pkg) { m["a"] = lib("c/sub") },
			[]string{`a (layer "low") imports c/sub of the higher layer "mid" (x.go)`}},
		{"import of the commands", func(m map[string]*pkg) { m["c/sub"] = lib("cmd/tool") },
			[]string{`c/sub (layer "mid") imports cmd/tool of the higher layer "top"`}},
		{"sibling import", func(m map[string]*pkg) { m["b/inner"] = lib("a") },
			[]string{`b/inner (component b) imports a of its sibling component a in layer "low" (x.go)`}},
		{"package in no layer", func(m map[string]*pkg) { m["d"] = lib("a") },
			[]string{"d: in no layer"}},
		{"import of a package in no layer", func(m map[string]*pkg) { m["d"] = lib(); m["c"] = lib("d") },
			[]string{"d: in no layer"}},
		{"main outside cmd", func(m map[string]*pkg) { m["c/sub"].name = "main" },
			[]string{"c/sub: package main outside cmd/"}},
		{"init in a library", func(m map[string]*pkg) { m["b"].inits = []string{"reexec.go"} },
			[]string{"b: library package with func init in reexec.go"}},
		{"no package doc", func(m map[string]*pkg) { m["c"].doc = false },
			[]string{"c: no package doc comment"}},
		{"stale pattern", func(m map[string]*pkg) { delete(m, "a") },
			[]string{`pattern "a" of component a matches no package`}},
		{"two breaches", func(m map[string]*pkg) { m["a"] = lib("b", "c") },
			[]string{"a (component a) imports b of its sibling", "a (layer \"low\") imports c of the higher layer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := clean()
			tt.change(m)
			got := check(m, arch)
			if len(got) != len(tt.want) {
				t.Fatalf("check = %q, want %d problems like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestLoad checks the loader on a made-up module on disk: imports of the module's
// own packages are kept with their file, others dropped, test files, testdata and
// "//go:build ignore" files skipped, files for other systems kept.
func TestLoad(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("low/low.go", "// Package low is low.\npackage low\n")
	write("high/high.go", "package high\n\nimport (\n\t\"fmt\"\n\t\"example.com/m/low\"\n)\n\nvar _ = fmt.Sprint\nvar _ = low.X\n")
	write("low/up_windows.go", "//go:build windows\n\npackage low\n\nimport _ \"example.com/m/high\"\n\nfunc init() {}\n")
	write("low/gen.go", "//go:build ignore\n\npackage main\n\nimport _ \"example.com/m/high\"\n")
	write("low/low_test.go", "package low\n\nimport _ \"example.com/m/high\"\n")
	write("low/testdata/x.go", "package x\n\nimport _ \"example.com/m/high\"\n")
	write("cmd/tool/main.go", "package main\n\nimport _ \"example.com/m/high\"\n\nfunc init() {}\nfunc main() {}\n")
	pkgs, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for path, p := range pkgs {
		got[path] = fmt.Sprintf("%s %v %v %v", p.name, p.imports, p.inits, p.doc)
	}
	want := map[string]string{
		"low":      "low map[high:[up_windows.go]] [up_windows.go] true",
		"high":     "high map[low:[high.go]] [] false",
		"cmd/tool": "main map[high:[main.go]] [main.go] false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("load =\n%v\nwant\n%v", got, want)
	}
}
