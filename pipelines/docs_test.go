package pipelines

import (
	"os"
	"strings"
	"testing"
)

// TestDocsMatchRegistry keeps docs/PIPELINES.md's reference equal to the registry.
// Regenerate it with: psiflow stages -markdown (between the markers).
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
		t.Fatalf("docs/PIPELINES.md's reference is out of date; regenerate it with psiflow stages -markdown.\nwant:\n%s", want)
	}
	for _, k := range Default().Kinds() {
		if !strings.Contains(doc, "`"+k.Name+"`") {
			t.Errorf("kind %s is not documented", k.Name)
		}
	}
}
