package docscheck

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// The documents whose links are checked, as globs relative to the repository root.
var checked = []string{"README.md", "docs/*.md", "benchmarks/README.md", "python/README.md"}

// TestRepoLinks fails on a link in the repository's documents that points at a
// relative file that does not exist or at an anchor no heading produces.
func TestRepoLinks(t *testing.T) {
	fsys := os.DirFS("../..")
	var files []string
	for _, g := range checked {
		m, err := fs.Glob(fsys, g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 3 {
		t.Fatalf("found only %v: run from internal/docscheck", files)
	}
	for _, p := range checkLinks(fsys, files) {
		t.Error(p)
	}
}

func TestCheckLinks(t *testing.T) {
	other := "# Other\n\n## Goals (issue 5)\n\n## Décodé `fast` **path**: O_DIRECT, 2×\n\n## Goals\n\n## Goals\n\n```\n## not a heading\n```\n"
	cases := []struct {
		name string
		doc  string
		want []string // substrings of the problems, in order; none when nil
	}{
		{"file exists", "[o](other.md) and [d](sub) and ![i](sub/pic.png)", nil},
		{"file missing", "text\n[o](gone.md)", []string{"a.md:2: gone.md: no such file"}},
		{"image missing", "![i](sub/none.png)", []string{"sub/none.png: no such file"}},
		{"anchor in other file", "[g](other.md#goals-issue-5) [d](other.md#décodé-fast-path-o_direct-2)", nil},
		{"anchor missing in other file", "[g](other.md#goals-issue-6)", []string{`other.md#goals-issue-6: no heading of other.md makes anchor "goals-issue-6"`}},
		{"duplicates numbered", "[a](other.md#goals) [b](other.md#goals-1) [c](other.md#goals-2)", []string{`other.md#goals-2: no heading`}},
		{"heading in a code block makes no anchor", "[n](other.md#not-a-heading)", []string{`#not-a-heading`}},
		{"same-file anchor", "# Top: one\n\n[t](#top-one)\n[u](#top)", []string{`a.md:4: #top: no heading of a.md makes anchor "top"`}},
		{"links in code are not links", "```\n[x](gone.md)\n```\n`[y](gone.md)` ~~~ \n", nil},
		{"external links are not checked", "[w](https://example.com/x.md#nope) [m](mailto:a@b.c)", nil},
		{"link text across lines", "[two\nlines](gone.md)", []string{"a.md:1: gone.md"}},
		{"title and angle brackets", `[t](other.md#goals "Goals") [u](<other.md#nope>)`, []string{`other.md#nope`}},
		{"reference definition", "[r]: gone.md\n", []string{"a.md:1: gone.md"}},
		{"escaped fragment", "[e](other.md#d%C3%A9cod%C3%A9-fast-path-o_direct-2)", nil},
		{"no anchors checked outside Markdown", "[l](sub/pic.png#L3)", nil},
		{"parent directory", "[p](../outside.md)", []string{"../outside.md: no such file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"a.md":        {Data: []byte(c.doc)},
				"other.md":    {Data: []byte(other)},
				"sub/pic.png": {Data: []byte("png")},
			}
			got := checkLinks(fsys, []string{"a.md"})
			if len(got) != len(c.want) {
				t.Fatalf("got %d problems %q, want %d like %q", len(got), got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	cases := []struct{ heading, want string }{
		{"## Decode stages (issue 6): benchmarks", "decode-stages-issue-6-benchmarks"},
		{"### `psiflow doctor` on this host", "psiflow-doctor-on-this-host"},
		{"## psiflow.DataLoader against torch's DataLoader", "psiflowdataloader-against-torchs-dataloader"},
		{"### 2026-11-29 14:19 UTC: final code, cold / 256 MiB", "2026-11-29-1419-utc-final-code-cold--256-mib"},
		{"# See [the guide](x.md) now", "see-the-guide-now"},
		{"## Gate (goal: under 1 µs) — **met**", "gate-goal-under-1-µs--met"},
		{"## Closed ##", "closed"},
	}
	for _, c := range cases {
		if got := anchors(c.heading + "\n"); len(got) != 1 || !got[c.want] {
			t.Errorf("anchors(%q) = %v, want %q", c.heading, got, c.want)
		}
	}
}

var (
	fenceRE   = regexp.MustCompile("^ {0,3}(```|~~~)")
	headingRE = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	codeRE    = regexp.MustCompile("`+[^`]*`+")
	// An inline link or image: [text](target "title"); text may span lines.
	linkRE = regexp.MustCompile(`\[[^\]]*\]\(\s*(<[^>]*>|[^()\s]*)(?:\s+"[^"]*")?\s*\)`)
	refRE  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	// Inline markup GitHub drops from a heading's text before it makes the anchor.
	mdLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// What a GitHub anchor keeps: letters, marks, digits, connectors (_), '-' and spaces.
	dropRE = regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc}\- ]`)
)

// prose returns doc with the lines of fenced code blocks and inline code spans
// blanked, so that what they show is neither a link nor a heading; offsets and line
// numbers stay those of doc.
func prose(doc string) string {
	lines := strings.SplitAfter(doc, "\n")
	inFence := false
	for i, l := range lines {
		fence := fenceRE.MatchString(l)
		if inFence || fence {
			lines[i] = blank(l)
		} else {
			lines[i] = codeRE.ReplaceAllStringFunc(l, blank)
		}
		if fence {
			inFence = !inFence
		}
	}
	return strings.Join(lines, "")
}

func blank(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' {
			return r
		}
		return ' '
	}, s)
}

// anchors returns the anchors GitHub makes for doc's headings: the heading's text
// lower-cased, punctuation other than '-' dropped, each space a '-', and a
// repeated anchor numbered -1, -2, … in order.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines := strings.Split(doc, "\n")
	for i, l := range strings.Split(prose(doc), "\n") {
		// prose says which lines are headings (none in a code block); the text,
		// code spans included, is doc's.
		if !headingRE.MatchString(l) {
			continue
		}
		text := headingRE.FindStringSubmatch(lines[i])[1]
		a := slug(text)
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	return out
}

func slug(text string) string {
	text = mdLinkRE.ReplaceAllString(text, "$1")
	text = dropRE.ReplaceAllString(strings.ToLower(text), "")
	return strings.ReplaceAll(text, " ", "-")
}

// checkLinks returns a problem, "file:line: target: what", for each relative link
// of files (paths in fsys) to a file that does not exist or to an anchor that no
// heading of its Markdown target makes.
func checkLinks(fsys fs.FS, files []string) []string {
	var problems []string
	made := map[string]map[string]bool{}
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := made[p]; ok {
			return a, nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		made[p] = anchors(string(b))
		return made[p], nil
	}
	for _, f := range files {
		doc, err := fs.ReadFile(fsys, f)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		text := prose(string(doc))
		var found [][]int
		found = append(found, linkRE.FindAllStringSubmatchIndex(text, -1)...)
		found = append(found, refRE.FindAllStringSubmatchIndex(text, -1)...)
		for _, m := range found {
			target := strings.Trim(text[m[2]:m[3]], "<>")
			line := 1 + strings.Count(text[:m[0]], "\n")
			if p := checkTarget(fsys, anchorsOf, f, target); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", f, line, target, p))
			}
		}
	}
	return problems
}

// checkTarget says what is wrong with target, a link in file from, or "".
func checkTarget(fsys fs.FS, anchorsOf func(string) (map[string]bool, error), from, target string) string {
	if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, frag, _ := strings.Cut(target, "#")
	p := from
	if file != "" {
		file, err := url.PathUnescape(file)
		if err != nil {
			return err.Error()
		}
		if strings.HasPrefix(file, "/") { // GitHub resolves it from the repository's root
			p = path.Clean(file[1:])
		} else {
			p = path.Join(path.Dir(from), file)
		}
		if !fs.ValidPath(p) {
			return "no such file (it leaves the repository)"
		}
		if _, err := fs.Stat(fsys, p); err != nil {
			return "no such file"
		}
	}
	if frag == "" || !strings.HasSuffix(p, ".md") {
		return ""
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return err.Error()
	}
	a, err := anchorsOf(p)
	if err != nil {
		return err.Error()
	}
	if !a[frag] {
		return fmt.Sprintf("no heading of %s makes anchor %q", p, frag)
	}
	return ""
}
