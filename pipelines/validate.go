package pipelines

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/psiflow/psiflow/memory"
)

// validate checks what load read against the registry (the top-level and resource
// parameters, every component's kind, role, fanout, name and parameters, and the
// element types along the edges) and builds the pipeline; it returns nil when
// anything was wrong, the errors being in l.errs.
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
		PauseTimeout: pauseTimeout(res.Duration("pause_timeout")), NoRoom: memory.NoRoomPolicy(res.String("no_room")),
		Cache: res.String("cache"), CacheMax: res.Int("cache_max"),
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
	l.checkDevice(p, raws)
	if len(l.errs) > 0 {
		return nil
	}
	return p
}

// checkDevice refuses a device kind under resources.device cpu (at the kind)
// and device cuda or sim in a pipeline without one (at resources.device).
func (l *loader) checkDevice(p *Pipeline, raws []*rawComp) {
	var names []string
	for i, c := range p.Nodes() {
		if !c.Kind.Device {
			continue
		}
		names = append(names, c.Kind.Name)
		if p.Resource.Device == "cpu" {
			l.add(raws[i].kindAt.errf("%s %q: kind %s works on a device, but resources.device is cpu; set resources.device: cuda (or sim to simulate one, or auto), or collate instead of pin to end on the host",
				c.Kind.Role, c.Name, c.Kind.Name))
		}
	}
	if len(names) > 0 || (p.Resource.Device != "cuda" && p.Resource.Device != "sim") {
		return
	}
	at := l.rootAt.errf("resources.device %s: no stage copies to the device; end the pipeline with batch → pin → h2d → mark_preemptible (then a discard sink or a Go consumer), or use device: cpu", p.Resource.Device)
	for i := len(l.resources) - 1; i >= 0; i-- {
		if en := l.resources[i]; en.key == "device" {
			at = en.val.errf("%s", at.Msg)
			break
		}
	}
	l.add(at)
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
