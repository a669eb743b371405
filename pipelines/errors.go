package pipelines

import (
	"fmt"
	"strconv"
	"strings"
)

// Pos is a place in a pipeline file (or in a -set override): 1-based line and column.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return p.File + ":" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col)
}

// Error is one problem in a pipeline file: where, what, and the offending line.
type Error struct {
	Pos  Pos
	Msg  string
	Line string // the source line at Pos.Line ("" when unknown)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pos.String())
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Line != "" {
		num := strconv.Itoa(e.Pos.Line)
		fmt.Fprintf(&b, "\n  %s | %s", num, e.Line)
		if e.Pos.Col > 0 {
			// Keep tabs so the caret lines up under the column on a terminal.
			pad := []rune(e.Line)
			if len(pad) > e.Pos.Col-1 {
				pad = pad[:e.Pos.Col-1]
			}
			for i, r := range pad {
				if r != '\t' {
					pad[i] = ' '
				}
			}
			fmt.Fprintf(&b, "\n  %s | %s^", strings.Repeat(" ", len(num)), string(pad))
		}
	}
	return b.String()
}

// ErrorList is every problem found in a file, in file order. It is what [Load]
// and [Parse] return when a file is not valid.
type ErrorList []*Error

// maxErrors bounds how many problems one file reports.
const maxErrors = 20

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	s := strings.Join(parts, "\n")
	if len(l) >= maxErrors {
		s += "\n(more problems not shown)"
	}
	return s
}

// srcText is the text of a file or an override, for positions and snippets.
type srcText struct {
	name     string
	lines    []string
	colShift int // added to columns (a -set value sits after "key=")
}

func newSrc(name string, data []byte) *srcText {
	return &srcText{name: name, lines: strings.Split(string(data), "\n")}
}

func (s *srcText) pos(line, col int) Pos {
	if line > 0 {
		col += s.colShift
	}
	return Pos{File: s.name, Line: line, Col: col}
}

func (s *srcText) errAt(p Pos, format string, args ...any) *Error {
	e := &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
	if p.Line >= 1 && p.Line <= len(s.lines) {
		e.Line = strings.TrimRight(s.lines[p.Line-1], "\r")
	}
	return e
}

// didYouMean returns ` (did you mean "x"?)` for the closest of candidates to
// word, or "" when none is close.
func didYouMean(word string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := levenshtein(strings.ToLower(word), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(word)/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// oneOf formats a list of accepted words for messages.
func oneOf(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, ", ")
}
