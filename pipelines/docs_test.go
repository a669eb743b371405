package pipelines

import (
	"os"
	"strings"
	"testing"
)

// TestDocsMatchRegistry keeps docs/PIPELINES.md's reference equal to the registry.
// Regenerate it with PSIFLOW_UPDATE_DOCS=1 go test -run TestDocsMatchRegistry
// ./pipelines (or paste psiflow stages -markdown between the markers).
func TestDocsMatchRegistry(t *testing.T) {
	b, err := os.ReadFile("../docs/PIPELINES.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- BEGIN GENERATED REFERENCE -->\n", "<!-- END GENERATED REFERENCE -->"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/PIPELINES.md lacks the %q … %q markers", begin, end)
	}
	if got, want := doc[i+len(begin):j], Default().Markdown(); got != want {
		if os.Getenv("PSIFLOW_UPDATE_DOCS") == "1" {
			if err := os.WriteFile("../docs/PIPELINES.md", []byte(doc[:i+len(begin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log("docs/PIPELINES.md's reference regenerated")
			return
		}
		t.Fatalf("docs/PIPELINES.md's reference is out of date; regenerate it with psiflow stages -markdown.\nwant:\n%s", want)
	}
	for _, k := range Default().Kinds() {
		if !strings.Contains(doc, "`"+k.Name+"`") {
			t.Errorf("kind %s is not documented", k.Name)
		}
	}
}

// yamlBlocks returns the ```yaml blocks of a Markdown file after heading.
func yamlBlocks(t *testing.T, path, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, heading)
	if i < 0 {
		t.Fatalf("%s lacks %q", path, heading)
	}
	var out []string
	for rest := doc[i:]; ; {
		s := strings.Index(rest, "```yaml\n")
		if s < 0 {
			return out
		}
		rest = rest[s+len("```yaml\n"):]
		e := strings.Index(rest, "```")
		out = append(out, rest[:e])
		rest = rest[e+3:]
	}
}

// TestDocumentedFilesAreValid keeps the README's example equal to the shipped
// imagefolder.yaml (without its comment header) and every example file in
// docs/PIPELINES.md valid.
func TestDocumentedFilesAreValid(t *testing.T) {
	blocks := yamlBlocks(t, "../README.md", "## Pipeline files")
	if len(blocks) == 0 {
		t.Fatal("README has no yaml block under Pipeline files")
	}
	shipped := shippedFiles(t)["imagefolder.yaml"]
	var body []string
	for _, l := range strings.SplitAfter(string(shipped), "\n") {
		if len(body) == 0 && strings.HasPrefix(l, "#") {
			continue
		}
		body = append(body, l)
	}
	if blocks[0] != strings.Join(body, "") {
		t.Fatalf("README's example differs from pipelines/imagefolder.yaml:\n%s\nwant:\n%s", blocks[0], strings.Join(body, ""))
	}
	for i, b := range yamlBlocks(t, "../docs/PIPELINES.md", "# Pipeline files") {
		if _, err := Parse("PIPELINES.md block "+string(rune('1'+i)), []byte(b), Options{Env: envOf(nil)}); err != nil {
			t.Errorf("docs/PIPELINES.md example %d: %v", i+1, err)
		}
	}
}
