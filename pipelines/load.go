package pipelines

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/psiflow/psiflow/memory/pause"
)

// Options configure [Load] and [Parse].
type Options struct {
	// Registry holds the kinds; nil means [Default].
	Registry *Registry
	// Env looks up ${VAR}; nil means os.LookupEnv.
	Env func(name string) (string, bool)
	// Set are overrides "key=value", applied after the file is read: key is
	// epochs, name, limit, resources.KEY, source.KEY, sink.KEY, stages.N.KEY
	// (N from 0) or NAME.KEY for a stage of that name; value is YAML
	// (a scalar or a flow list like [a, b]).
	Set []string
}

// Load reads and validates the pipeline file at path. Every problem found is
// in the returned [ErrorList], each naming file:line:col with the offending line.
func Load(path string, opts Options) (*Pipeline, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Parse(path, data, opts)
}

// Parse validates the pipeline file data named name (for messages).
func Parse(name string, data []byte, opts Options) (*Pipeline, error) {
	l := &loader{reg: opts.Registry, env: opts.Env, src: newSrc(name, data)}
	if l.reg == nil {
		l.reg = Default()
	}
	if l.env == nil {
		l.env = os.LookupEnv
	}
	p := l.load(data, opts.Set)
	if len(l.errs) > 0 {
		return nil, l.errs
	}
	return p, nil
}

type rawComp struct {
	role   Role
	index  int // stage index
	at     value
	kind   string
	kindAt value
	name   string
	nameAt value
	inputs []string
	inAt   []value
	fanout value
	config []entry
}

type loader struct {
	reg  *Registry
	env  func(string) (string, bool)
	src  *srcText
	errs ErrorList

	top       []entry
	resources []entry
	source    *rawComp
	stages    []*rawComp
	sink      *rawComp
	rootAt    value
}

func (l *loader) add(e *Error) bool {
	if e == nil {
		return false
	}
	if len(l.errs) < maxErrors {
		l.errs = append(l.errs, e)
	}
	return true
}

func (l *loader) load(data []byte, sets []string) *Pipeline {
	if l.add(checkBounds(l.src, data)) {
		return nil
	}
	body, e := parseDoc(l.src, data)
	if l.add(e) {
		return nil
	}
	l.rootAt = value{node: body, src: l.src}
	if body == nil {
		l.add(l.src.errAt(l.src.pos(0, 0), "empty pipeline file: it needs at least a source and a sink"))
		return nil
	}
	entries, e := mappingEntries(l.rootAt, "a pipeline file")
	if l.add(e) {
		return nil
	}
	for _, en := range entries {
		switch en.key {
		case "source":
			l.source = l.comp(SourceRole, 0, en.val)
		case "sink":
			l.sink = l.comp(SinkRole, 0, en.val)
		case "stages":
			items, e := sequence(en.val, "stages")
			if l.add(e) {
				continue
			}
			for i, it := range items {
				if c := l.comp(StageRole, i, it); c != nil {
					l.stages = append(l.stages, c)
				}
			}
		case "resources":
			r, e := mappingEntries(en.val, "resources")
			l.add(e)
			l.resources = r
		default:
			if contains(topKeys, en.key) {
				l.top = append(l.top, en)
				continue
			}
			l.add(l.src.errAt(en.keyPos, "unknown key %q%s; a pipeline file has %s", en.key, didYouMean(en.key, topKeys), oneOf(topKeys)))
		}
	}
	for _, s := range sets {
		l.override(s)
	}
	if len(l.errs) > 0 {
		return nil
	}
	return l.validate()
}

// comp reads one source, stage or sink: a mapping, or a bare kind name.
func (l *loader) comp(role Role, index int, v value) *rawComp {
	c := &rawComp{role: role, index: index, at: v}
	what := role.String()
	if role == StageRole {
		what = "stage " + strconv.Itoa(index+1)
	}
	if uv, e := unwrap(v); e == nil {
		if _, isScalar := scalarText(uv.node); isScalar && uv.node != nil {
			if _, null := uv.node.(*ast.NullNode); !null {
				s, _, e := scalar(uv, l.env)
				if l.add(e) {
					return nil
				}
				c.kind, c.kindAt = s, uv
				return c
			}
		}
	}
	entries, e := mappingEntries(v, what)
	if l.add(e) {
		return nil
	}
	for _, en := range entries {
		switch en.key {
		case "kind", "name", "fanout":
			s, null, e := scalar(en.val, l.env)
			if l.add(e) {
				continue
			}
			if null || s == "" {
				l.add(en.val.errf("%s: %s is empty", what, en.key))
				continue
			}
			switch en.key {
			case "kind":
				c.kind, c.kindAt = s, en.val
			case "name":
				c.name, c.nameAt = s, en.val
			case "fanout":
				c.fanout = en.val
			}
		case "input":
			vals := []value{en.val}
			if uv, e := unwrap(en.val); e == nil {
				if _, isSeq := uv.node.(*ast.SequenceNode); isSeq {
					vals, e = sequence(uv, "input")
					if l.add(e) {
						continue
					}
				}
			}
			for _, iv := range vals {
				s, null, e := scalar(iv, l.env)
				if l.add(e) {
					continue
				}
				if null || s == "" {
					l.add(iv.errf("%s: an empty input name", what))
					continue
				}
				c.inputs, c.inAt = append(c.inputs, s), append(c.inAt, iv)
			}
		case "config":
			cfg, e := mappingEntries(en.val, what+" config")
			l.add(e)
			c.config = cfg
		default:
			hint := didYouMean(en.key, componentKeys)
			if hint == "" {
				hint = "; parameters go under config:"
			}
			l.add(l.src.errAt(en.keyPos, "%s: unknown key %q%s", what, en.key, hint))
		}
	}
	if c.kind == "" {
		l.add(l.src.errAt(posOf(l.src, v.node), "%s has no kind: (kinds: %s)", what, oneOf(l.reg.kindNames(role))))
		return nil
	}
	return c
}

// override applies one -set key=value.
func (l *loader) override(set string) {
	key, val, ok := strings.Cut(set, "=")
	src := &srcText{name: "-set " + key, lines: []string{set}, colShift: len(key) + 1}
	if !ok || key == "" {
		l.add(src.errAt(src.pos(0, 0), "override %q: want key=value", set))
		return
	}
	body, e := parseDoc(&srcText{name: src.name, lines: []string{val}}, []byte(val))
	if e != nil {
		e.Pos, e.Line = src.pos(e.Pos.Line, e.Pos.Col), set
		if e.Pos.Line == 0 {
			e.Pos.Line = 1
		}
		l.add(e)
		return
	}
	v := value{node: body, src: src}
	put := func(list *[]entry, k string) {
		en := entry{key: k, keyPos: Pos{File: src.name, Line: 1, Col: 1}, val: v}
		for i := range *list {
			if (*list)[i].key == k {
				(*list)[i] = en
				return
			}
		}
		*list = append(*list, en)
	}
	head, rest, dotted := strings.Cut(key, ".")
	switch {
	case !dotted && contains([]string{"name", "epochs", "limit", "start_epoch", "start_at"}, key):
		put(&l.top, key)
		return
	case !dotted:
	case head == "resources":
		put(&l.resources, rest)
		return
	case head == "source" && l.source != nil:
		put(&l.source.config, rest)
		return
	case head == "sink" && l.sink != nil:
		put(&l.sink.config, rest)
		return
	case head == "stages":
		n, k, ok := strings.Cut(rest, ".")
		i, err := strconv.Atoi(n)
		if ok && err == nil && i >= 0 && i < len(l.stages) {
			put(&l.stages[i].config, k)
			return
		}
		l.add(src.errAt(Pos{File: src.name, Line: 1, Col: 1}, "override %q: stages.N.KEY with N from 0 to %d", key, len(l.stages)-1))
		return
	default:
		var names []string
		for _, c := range []*rawComp{l.source, l.sink} {
			if c == nil {
				continue
			}
			name := c.name
			if name == "" {
				name = c.kind
			}
			names = append(names, name)
			if name == head {
				put(&c.config, rest)
				return
			}
		}
		for i, c := range l.stages {
			name := l.stageName(i)
			names = append(names, name)
			if name == head {
				put(&c.config, rest)
				return
			}
		}
		l.add(src.errAt(Pos{File: src.name, Line: 1, Col: 1}, "override %q: no node named %q%s", key, head, didYouMean(head, names)))
		return
	}
	l.add(src.errAt(Pos{File: src.name, Line: 1, Col: 1}, "override %q: want name, epochs, limit, start_epoch, start_at, resources.KEY, source.KEY, sink.KEY, stages.N.KEY or STAGE.KEY", key))
}

// stageName is stage i's name: its own, or its kind, numbered when repeated.
func (l *loader) stageName(i int) string {
	c := l.stages[i]
	if c.name != "" {
		return c.name
	}
	n := 1
	for j := 0; j < i; j++ {
		if l.stages[j].name == "" && l.stages[j].kind == c.kind {
			n++
		}
	}
	if n == 1 {
		return c.kind
	}
	return c.kind + "-" + strconv.Itoa(n)
}

// params converts entries against a parameter list into cfg.
func (l *loader) params(what string, params []Param, entries []entry, cfg *Config, at value) {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	given := map[string]entry{}
	for _, en := range entries {
		if !contains(names, en.key) {
			src := en.val.src
			if en.keyPos.File == l.src.name {
				src = l.src
			}
			list := "it takes no parameters"
			if len(names) > 0 {
				list = "it takes " + strings.Join(names, ", ")
			}
			l.add(src.errAt(en.keyPos, "%s: unknown parameter %q%s; %s", what, en.key, didYouMean(en.key, names), list))
			continue
		}
		given[en.key] = en
	}
	for _, p := range params {
		en, ok := given[p.Name]
		if !ok {
			if p.Required {
				l.add(at.errf("%s: parameter %q is required (%s)", what, p.Name, p.Doc))
				continue
			}
			cfg.vals[p.Name] = p.Default
			continue
		}
		v, e := convert(p, en.val, l.env)
		if e != nil {
			e.Msg = what + ": " + e.Msg
			l.add(e)
			continue
		}
		cfg.vals[p.Name] = v
		cfg.set[p.Name] = en.val.pos()
	}
}

// pauseTimeout turns resources.pause_timeout into the runtime's: 0 (wait without
// end) is pause.Forever.
func pauseTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return pause.Forever
	}
	return d
}
