package pipelines

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteReference prints every element type and kind with its parameters, as
// "psiflow stages" shows them.
func (r *Registry) WriteReference(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Element types:")
	for _, t := range r.Types() {
		fmt.Fprintf(tw, "  %s\t%s\n", t.Name, t.Doc)
	}
	role := Role(-1)
	for _, k := range r.Kinds() {
		if k.Role != role {
			role = k.Role
			fmt.Fprintf(tw, "\n%s kinds:\n", strings.ToUpper(role.String()[:1])+role.String()[1:])
		}
		fmt.Fprintf(tw, "\n  %s (%s): %s\n", k.Name, signature(k), k.Doc)
		for _, p := range k.Params {
			rng := p.RangeString()
			if rng != "" {
				rng = ", " + rng
			}
			fmt.Fprintf(tw, "    %s\t%s = %s%s\t%s\n", p.Name, p.Type, p.DefaultString(), rng, p.Doc)
		}
	}
	fmt.Fprintln(tw, "\nResources (resources:):")
	for _, p := range resourceParams {
		fmt.Fprintf(tw, "    %s\t%s = %s\t%s\n", p.Name, p.Type, p.DefaultString(), p.Doc)
	}
	fmt.Fprintln(tw, "\nTop level:")
	for _, p := range topParams {
		fmt.Fprintf(tw, "    %s\t%s = %s\t%s\n", p.Name, p.Type, p.DefaultString(), p.Doc)
	}
	return tw.Flush()
}

func signature(k *Kind) string {
	switch k.Role {
	case SourceRole:
		return "→ " + k.Out
	case SinkRole:
		return k.In + " →"
	}
	return k.In + " → " + k.Out
}

// Markdown returns the reference as Markdown (the generated part of
// docs/PIPELINES.md; a test keeps the two equal).
func (r *Registry) Markdown() string {
	var b strings.Builder
	b.WriteString("### Element types\n\n| type | what |\n| --- | --- |\n")
	for _, t := range r.Types() {
		fmt.Fprintf(&b, "| `%s` | %s |\n", t.Name, mdEscape(t.Doc))
	}
	for _, k := range r.Kinds() {
		fmt.Fprintf(&b, "\n### %s `%s` (%s)\n\n%s\n", k.Role, k.Name, signature(k), mdEscape(k.Doc))
		if len(k.Params) > 0 {
			b.WriteString("\n")
			writeParamTable(&b, k.Params)
		}
	}
	b.WriteString("\n### `resources:`\n\n")
	writeParamTable(&b, resourceParams)
	b.WriteString("\n### Top level\n\n")
	writeParamTable(&b, topParams)
	return b.String()
}

func writeParamTable(b *strings.Builder, ps []Param) {
	b.WriteString("| parameter | type | default | range | what |\n| --- | --- | --- | --- | --- |\n")
	for _, p := range ps {
		fmt.Fprintf(b, "| `%s` | %s | `%s` | %s | %s |\n", p.Name, p.Type, p.DefaultString(), mdEscape(p.RangeString()), mdEscape(p.Doc))
	}
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
