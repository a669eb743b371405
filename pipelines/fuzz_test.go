package pipelines

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func shippedFiles(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := fs.Glob(Shipped(), "*.yaml")
	if err != nil || len(names) < 4 {
		t.Fatalf("shipped files %v, %v", names, err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		b, err := fs.ReadFile(Shipped(), n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// FuzzParse checks that no input makes Parse panic, and that every failure is
// an ErrorList whose entries name a place. Its seed corpus runs with the normal tests.
func FuzzParse(f *testing.F) {
	for _, b := range shippedFiles(f) {
		f.Add(b)
	}
	for _, s := range []string{
		good, "", "a", "- 1", "source: {", "source: [1, [2, [3]]]", "x: &a [*a]", "x: *y",
		good + "resources: {memory: 1.5GiB, cpus: 0.5, pids: 100}\n",
		strings.Replace(good, "{items: 10}", "{items: ${N:-3}}", 1),
		"source:\n  kind: files\n  config:\n    dir: \"${HOME}\"\n    extensions: [.a, .b]\nsink: discard\n",
		"--- \nsource: generate\n---\nsink: discard\n",
		"source: generate\nstages:\n  - {kind: decode, input: [generate, generate]}\nsink: discard\n",
		"\t\tsource: x", "source: !!str generate\nsink: !!binary x\n",
		strings.Repeat("- ", 40) + "x", strings.Repeat("{a: ", 30) + strings.Repeat("}", 30),
	} {
		f.Add([]byte(s))
	}
	env := envOf(map[string]string{"N": "4", "DATA": "/tmp"})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("f.yaml", data, Options{Env: env})
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.Pos.File != "f.yaml" || e.Msg == "" {
					t.Fatalf("error without a place or a message: %#v", e)
				}
				_ = e.Error()
			}
			return
		}
		for _, c := range p.Nodes() {
			if c == nil || c.Kind == nil || c.Config == nil {
				t.Fatalf("valid pipeline with an incomplete node: %+v", p)
			}
		}
	})
}

func TestBoundsRefuseLargeAndDeepInput(t *testing.T) {
	big := []byte("name: x\n" + strings.Repeat("# padding\n", MaxFileSize/10+1))
	if _, err := Parse("f.yaml", big, Options{}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("a file over MaxFileSize: %v", err)
	}
	for _, deep := range []string{
		strings.Repeat("[", 5000),
		strings.Repeat("- ", 5000) + "x",
		func() string {
			var b strings.Builder
			for i := range 200 {
				b.WriteString(strings.Repeat(" ", i) + "k:\n")
			}
			return b.String()
		}(),
	} {
		if _, err := Parse("f.yaml", []byte(deep), Options{}); err == nil || !strings.Contains(err.Error(), "nested more than") {
			t.Fatalf("deep input %.20q...: %v", deep, err)
		}
	}
}

func TestShippedFilesValidate(t *testing.T) {
	for name, b := range shippedFiles(t) {
		p, err := Parse(name, b, Options{Env: envOf(nil)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Device() != "cpu" || len(p.Stages) == 0 {
			t.Fatalf("%s: device %q (%s), %d stages", name, p.Resource.Device, p.Device(), len(p.Stages))
		}
	}
}

// BenchmarkValidate parses and validates each shipped file (target: under 50 ms each).
func BenchmarkValidate(b *testing.B) {
	for name, data := range shippedFiles(b) {
		b.Run(name, func(b *testing.B) {
			env := envOf(nil)
			for b.Loop() {
				if _, err := Parse(name, data, Options{Env: env}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
