package pipelines

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/psiflow/psiflow/internal/bytesize"
)

// Input bounds: a pipeline file is a few dozen lines; these refuse anything that
// could make the YAML parser slow (it is superlinear in nesting depth).
const (
	MaxFileSize = 64 << 10 // bytes (a worst case this size, one long flow list, parses in under 1 s)
	MaxDepth    = 24       // nesting of mappings, sequences and flow brackets
)

// value is one YAML node with the text it came from.
type value struct {
	node ast.Node
	src  *srcText
}

func (v value) pos() Pos { return posOf(v.src, v.node) }

func posOf(src *srcText, n ast.Node) Pos {
	if n == nil || n.GetToken() == nil {
		if src.colShift > 0 {
			return src.pos(1, 1) // an empty -set value: point just after "key="
		}
		return src.pos(0, 0)
	}
	p := n.GetToken().Position
	return src.pos(p.Line, p.Column)
}

func (v value) errf(format string, args ...any) *Error {
	return v.src.errAt(v.pos(), format, args...)
}

// entry is one key of a mapping.
type entry struct {
	key    string
	keyPos Pos
	val    value
}

// checkBounds refuses input too large or too deeply nested before parsing it.
func checkBounds(src *srcText, data []byte) *Error {
	if len(data) > MaxFileSize {
		return src.errAt(src.pos(0, 0), "file is %d bytes; a pipeline file may have at most %d", len(data), MaxFileSize)
	}
	var indents []int
	flowDepth := 0
	for i, line := range src.lines {
		trimmed := strings.TrimLeft(line, " ")
		if trimmed == "" || trimmed[0] == '#' {
			continue
		}
		ind := len(line) - len(trimmed)
		for len(indents) > 0 && indents[len(indents)-1] > ind {
			indents = indents[:len(indents)-1]
		}
		if len(indents) == 0 || indents[len(indents)-1] < ind {
			indents = append(indents, ind)
		}
		// "- - - x" nests one sequence per dash on one line.
		dashes := 0
		for rest := trimmed; strings.HasPrefix(rest, "- ") || rest == "-"; rest = strings.TrimLeft(rest[1:], " ") {
			dashes++
			if rest == "-" {
				break
			}
		}
		quote := byte(0)
		for j := 0; j < len(line); j++ {
			c := line[j]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '#' && (j == 0 || line[j-1] == ' '):
				j = len(line)
			case c == '[' || c == '{':
				flowDepth++
			case c == ']' || c == '}':
				flowDepth = max(0, flowDepth-1)
			}
			if len(indents)+dashes+flowDepth > MaxDepth {
				return src.errAt(src.pos(i+1, j+1), "nested more than %d levels deep", MaxDepth)
			}
		}
	}
	return nil
}

// parseDoc parses data as one YAML document and returns its body.
func parseDoc(src *srcText, data []byte) (ast.Node, *Error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, syntaxError(src, err)
	}
	var bodies []ast.Node
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			bodies = append(bodies, d.Body)
		}
	}
	switch len(bodies) {
	case 0:
		return nil, nil
	case 1:
		return bodies[0], nil
	}
	return nil, src.errAt(posOf(src, bodies[1]), "a pipeline file holds one YAML document, this is a second")
}

// syntaxError turns a go-yaml error into an Error at its token.
func syntaxError(src *srcText, err error) *Error {
	var se interface {
		GetMessage() string
		GetToken() *token.Token
	}
	if errors.As(err, &se) && se.GetToken() != nil {
		p := se.GetToken().Position
		return src.errAt(src.pos(p.Line, p.Column), "YAML syntax: %s", se.GetMessage())
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return src.errAt(src.pos(0, 0), "YAML syntax: %s", msg)
}

// unwrap strips tags and comments, and refuses anchors and aliases (a file that
// needs them is too clever, and they can expand exponentially).
func unwrap(v value) (value, *Error) {
	for {
		switch n := v.node.(type) {
		case *ast.TagNode:
			v.node = n.Value
		case *ast.CommentNode:
			return value{src: v.src}, nil
		case *ast.AnchorNode, *ast.AliasNode:
			return v, v.errf("anchors and aliases are not supported in pipeline files")
		default:
			return v, nil
		}
	}
}

// mappingEntries returns the entries of a mapping node, refusing duplicate keys.
func mappingEntries(v value, what string) ([]entry, *Error) {
	v, err := unwrap(v)
	if err != nil {
		return nil, err
	}
	var mvs []*ast.MappingValueNode
	switch n := v.node.(type) {
	case *ast.MappingNode:
		mvs = n.Values
	case *ast.MappingValueNode:
		mvs = []*ast.MappingValueNode{n}
	case nil, *ast.NullNode:
		return nil, nil
	default:
		return nil, v.errf("%s must be a mapping of keys to values, not %s", what, describe(v.node))
	}
	out := make([]entry, 0, len(mvs))
	seen := map[string]bool{}
	for _, mv := range mvs {
		kv := value{node: mv.Key, src: v.src}
		key, ok := scalarText(mv.Key)
		if !ok {
			return nil, kv.errf("%s: keys must be plain words", what)
		}
		if seen[key] {
			return nil, kv.errf("%s: key %q appears twice", what, key)
		}
		seen[key] = true
		out = append(out, entry{key: key, keyPos: kv.pos(), val: value{node: mv.Value, src: v.src}})
	}
	return out, nil
}

// sequence returns the items of a sequence node.
func sequence(v value, what string) ([]value, *Error) {
	v, err := unwrap(v)
	if err != nil {
		return nil, err
	}
	switch n := v.node.(type) {
	case *ast.SequenceNode:
		out := make([]value, len(n.Values))
		for i, it := range n.Values {
			out[i] = value{node: it, src: v.src}
		}
		return out, nil
	case nil, *ast.NullNode:
		return nil, nil
	}
	return nil, v.errf("%s must be a list, not %s", what, describe(v.node))
}

// scalarText returns the text of a scalar node (null as "").
func scalarText(n ast.Node) (string, bool) {
	switch n := n.(type) {
	case *ast.MappingKeyNode:
		return scalarText(n.Value)
	case *ast.TagNode:
		return scalarText(n.Value)
	case *ast.StringNode:
		return n.Value, true
	case *ast.LiteralNode:
		if n.Value == nil {
			return "", true
		}
		return n.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	case *ast.NullNode:
		return "", true
	}
	return "", false
}

func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case nil, *ast.NullNode:
		return "empty"
	}
	if s, ok := scalarText(n); ok {
		return fmt.Sprintf("the value %q", s)
	}
	return "a " + n.Type().String()
}

// interpolate expands ${VAR} and ${VAR:-default} in s; $${ is a literal ${.
func interpolate(s string, env func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", s)
		}
		expr := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("${%s}: %q is not a variable name (letters, digits and _)", expr, name)
		}
		v, ok := env(name)
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} to give a default)", name, name)
		}
		i += end + 1
	}
	return b.String(), nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// scalar returns v's text after interpolation; null gives "" and isNull.
func scalar(v value, env func(string) (string, bool)) (text string, isNull bool, e *Error) {
	v, e = unwrap(v)
	if e != nil {
		return "", false, e
	}
	if v.node == nil {
		return "", true, nil
	}
	if _, null := v.node.(*ast.NullNode); null {
		return "", true, nil
	}
	s, ok := scalarText(v.node)
	if !ok {
		return "", false, v.errf("want a single value, not %s", describe(v.node))
	}
	s, err := interpolate(s, env)
	if err != nil {
		return "", false, v.errf("%v", err)
	}
	return s, false, nil
}

// convert turns v into p's Go value, checking type and range.
func convert(p Param, v value, env func(string) (string, bool)) (any, *Error) {
	if p.Type == StringList {
		if uv, err := unwrap(v); err == nil {
			if _, isSeq := uv.node.(*ast.SequenceNode); isSeq {
				items, err := sequence(uv, p.Name)
				if err != nil {
					return nil, err
				}
				out := make([]string, 0, len(items))
				for _, it := range items {
					s, null, err := scalar(it, env)
					if err != nil {
						return nil, err
					}
					if null {
						return nil, it.errf("%s: an empty item", p.Name)
					}
					out = append(out, s)
				}
				return out, nil
			}
		}
		s, null, err := scalar(v, env)
		if err != nil {
			return nil, err
		}
		if null {
			return []string{}, nil
		}
		return []string{s}, nil
	}
	s, null, e := scalar(v, env)
	if e != nil {
		return nil, e
	}
	if null {
		return nil, v.errf("%s: empty; want %s", p.Name, want(p))
	}
	bad := func() *Error { return v.errf("%s: %q is not %s", p.Name, s, want(p)) }
	var out any
	var num float64
	switch p.Type {
	case String:
		return s, nil
	case Enum:
		if !contains(p.Values, s) {
			return nil, v.errf("%s: %q is not one of %s%s", p.Name, s, oneOf(p.Values), didYouMean(s, p.Values))
		}
		return s, nil
	case Bool:
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
		return nil, bad()
	case Int:
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
		if err != nil {
			return nil, bad()
		}
		out, num = n, float64(n)
	case Float:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) {
			return nil, bad()
		}
		out, num = f, f
	case Bytes:
		if w, ok := p.Words[strings.ToLower(s)]; ok {
			return w, nil
		}
		n, err := parseBytes(s)
		if err != nil {
			return nil, bad()
		}
		out, num = n, float64(n)
	case Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			if s == "0" {
				d, err = 0, nil
			} else {
				return nil, bad()
			}
		}
		out, num = d, float64(d)
	default:
		return nil, v.errf("%s: parameter type %s cannot be converted", p.Name, p.Type)
	}
	if p.HasRange && (num < p.Min || num > p.Max) {
		return nil, v.errf("%s: %s is out of range (%s)", p.Name, s, p.RangeString())
	}
	return out, nil
}

func want(p Param) string {
	switch p.Type {
	case Int:
		return "an integer"
	case Float:
		return "a number"
	case Bool:
		return "true or false"
	case Bytes:
		if len(p.Words) > 0 {
			return "a size in bytes (e.g. 64MiB) or " + oneOf(sortedWords(p.Words))
		}
		return "a size in bytes (e.g. 64MiB)"
	case Duration:
		return "a duration (e.g. 50ms)"
	case Enum:
		return "one of " + oneOf(p.Values)
	case StringList:
		return "a list of strings"
	}
	return "a string"
}

// parseBytes parses a size in the one grammar of [bytesize.Parse] ("123",
// "64KiB", "1.5GiB", "1PiB"), or a negative integer, which only a range
// that allows it accepts ("-1" for memory: no limit).
func parseBytes(s string) (int64, error) {
	n, err := bytesize.Parse(s)
	if err != nil {
		if i, e := strconv.ParseInt(strings.TrimSpace(s), 10, 64); e == nil && i < 0 {
			return i, nil
		}
	}
	return n, err
}
