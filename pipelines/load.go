package pipelines

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/psiflow/psiflow/memory"
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

func (l *loader) validate() *Pipeline {
	p := &Pipeline{File: l.src.name, registry: l.reg}
	top := newConfig()
	l.params("top level", topParams, l.top, top, l.rootAt)
	res := newConfig()
	l.params("resources", resourceParams, l.resources, res, l.rootAt)
	p.top, p.res = top, res
	p.Name = top.String("name")
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(l.src.name), filepath.Ext(l.src.name))
	}
	p.Epochs, p.Limit = int(top.Int("epochs")), top.Int("limit")
	p.StartEpoch, p.StartAt = int(top.Int("start_epoch")), top.Int("start_at")
	p.Resource = Resources{
		Memory: res.Int("memory"), MemoryHigh: res.Int("memory_high"), CPUs: res.Float("cpus"), Pids: res.Int("pids"),
		Budget: res.Int("budget"), Queue: int(res.Int("queue")), Pressure: res.String("pressure") == "gate", Device: res.String("device"),
		MemoryMode: memory.Mode(res.String("memory_mode")), BelowFloor: memory.FloorPolicy(res.String("below_floor")),
		PauseTimeout: pauseTimeout(res.Duration("pause_timeout")),
		Cache:        res.String("cache"), CacheMax: res.Int("cache_max"),
	}
	if l.source == nil {
		l.add(l.src.errAt(posOf(l.src, l.rootAt.node), "no source: (kinds: %s)", oneOf(l.reg.kindNames(SourceRole))))
	}
	if l.sink == nil {
		l.add(l.src.errAt(posOf(l.src, l.rootAt.node), "no sink: (kinds: %s)", oneOf(l.reg.kindNames(SinkRole))))
	}
	if l.source == nil || l.sink == nil {
		return nil
	}
	byName := map[string]*Component{}
	order := map[string]int{}
	mk := func(rc *rawComp, name string, idx int) *Component {
		what := rc.role.String()
		if rc.role == StageRole {
			what = fmt.Sprintf("stage %d (%s)", rc.index+1, name)
		}
		k, ok := l.reg.Kind(rc.kind)
		if !ok {
			l.add(rc.kindAt.errf("%s: unknown kind %q%s; %s kinds: %s", what, rc.kind, didYouMean(rc.kind, l.reg.kindNames(rc.role)), rc.role, oneOf(l.reg.kindNames(rc.role))))
			return nil
		}
		if k.Role != rc.role {
			l.add(rc.kindAt.errf("%s: %q is a %s kind, not a %s", what, rc.kind, k.Role, rc.role))
			return nil
		}
		c := &Component{Kind: k, Name: name, Inputs: rc.inputs, Fanout: "roundrobin", Config: newConfig(), Pos: rc.kindAt.pos()}
		if rc.fanout.node != nil {
			s, _, e := scalar(rc.fanout, l.env)
			if !l.add(e) {
				if s != "broadcast" && s != "roundrobin" {
					l.add(rc.fanout.errf("%s: fanout %q is not one of \"broadcast\", \"roundrobin\"%s", what, s, didYouMean(s, []string{"broadcast", "roundrobin"})))
				}
				c.Fanout = s
			}
		}
		if rc.role == SourceRole && len(rc.inputs) > 0 {
			l.add(rc.inAt[0].errf("source: a source has no input"))
		}
		before := len(l.errs)
		l.params(fmt.Sprintf("%s of kind %s", what, k.Name), k.Params, rc.config, c.Config, rc.kindAt)
		if k.Check != nil && len(l.errs) == before {
			if err := k.Check(c.Config); err != nil {
				l.add(rc.kindAt.errf("%s (kind %s): %v", what, k.Name, err))
			}
		}
		if prev, dup := byName[name]; dup {
			at := rc.kindAt
			if rc.nameAt.node != nil {
				at = rc.nameAt
			}
			l.add(at.errf("%s: the name %q is taken by the node at %s", what, name, prev.Pos))
			return nil
		}
		byName[name] = c
		order[name] = idx
		return c
	}
	srcName := l.source.name
	if srcName == "" {
		srcName = l.source.kind
	}
	p.Source = mk(l.source, srcName, 0)
	for i, rc := range l.stages {
		if c := mk(rc, l.stageName(i), i+1); c != nil {
			p.Stages = append(p.Stages, c)
		} else {
			p.Stages = append(p.Stages, nil)
		}
	}
	sinkName := l.sink.name
	if sinkName == "" {
		sinkName = l.sink.kind
	}
	p.Sink = mk(l.sink, sinkName, len(l.stages)+1)
	for _, c := range p.Nodes() {
		if c == nil {
			return nil // an unknown kind: its edges cannot be checked
		}
	}
	// Edges: each node reads the one before it unless it names its inputs; the
	// element types must match.
	raws := append(append([]*rawComp{l.source}, l.stages...), l.sink)
	nodes := p.Nodes()
	uses := map[string]int{}
	for i := 1; i < len(nodes); i++ {
		c, rc := nodes[i], raws[i]
		if len(c.Inputs) == 0 {
			c.Inputs = []string{nodes[i-1].Name}
		}
		what := fmt.Sprintf("%s %q", c.Kind.Role, c.Name)
		for j, in := range c.Inputs {
			at := rc.kindAt
			if j < len(rc.inAt) {
				at = rc.inAt[j]
			}
			prod, ok := byName[in]
			if !ok || order[in] >= i {
				var earlier []string
				for _, n := range nodes[:i] {
					earlier = append(earlier, n.Name)
				}
				if ok {
					l.add(at.errf("%s: input %q comes later in the file; a node reads only nodes above it", what, in))
				} else {
					l.add(at.errf("%s: no node named %q%s; earlier nodes: %s", what, in, didYouMean(in, earlier), oneOf(earlier)))
				}
				continue
			}
			if prod.Kind.Role == SinkRole {
				l.add(at.errf("%s: %q is the sink and has no output", what, in))
				continue
			}
			uses[in]++
			if c.Kind.In != AnyType && prod.Kind.Out != c.Kind.In {
				l.add(at.errf("%s (kind %s) reads %s elements, but %q (kind %s) writes %s%s", what, c.Kind.Name, c.Kind.In, in, prod.Kind.Name, prod.Kind.Out, l.convertHint(prod.Kind.Out, c.Kind.In)))
			}
			if j > 0 {
				first := byName[c.Inputs[0]]
				if first != nil && first.Kind.Out != prod.Kind.Out {
					l.add(at.errf("%s: merged inputs must have one element type: %q writes %s, %q writes %s", what, c.Inputs[0], first.Kind.Out, in, prod.Kind.Out))
				}
			}
		}
	}
	for i, c := range nodes[:len(nodes)-1] {
		if uses[c.Name] < 2 || c.Fanout != "broadcast" {
			continue
		}
		if t, ok := l.reg.Type(c.Kind.Out); ok && !t.Broadcastable() {
			at := raws[i].kindAt
			if raws[i].fanout.node != nil {
				at = raws[i].fanout
			}
			l.add(at.errf("%s %q: %d nodes read it, but %s elements own buffers without reference counts and cannot be broadcast; write fanout: roundrobin to split them", c.Kind.Role, c.Name, uses[c.Name], t.Name))
		}
	}
	if len(l.errs) > 0 {
		return nil // an unread output would only echo a bad input above
	}
	for i, c := range nodes[:len(nodes)-1] {
		if uses[c.Name] == 0 {
			l.add(raws[i].kindAt.errf("%s %q: its output is read by no node (name it in a later input:, or remove it)", c.Kind.Role, c.Name))
		}
	}
	if len(l.errs) > 0 {
		return nil
	}
	return p
}

// convertHint names the stage kinds that turn from into to.
func (l *loader) convertHint(from, to string) string {
	var via []string
	for _, k := range l.reg.Kinds() {
		if k.Role == StageRole && k.In == from && k.Out == to {
			via = append(via, k.Name)
		}
	}
	if len(via) == 0 {
		return ""
	}
	return "; put a " + strings.Join(via, " or ") + " stage between them"
}

// pauseTimeout turns resources.pause_timeout into the runtime's: 0 (wait without
// end) is pause.Forever.
func pauseTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return pause.Forever
	}
	return d
}
