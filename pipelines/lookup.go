package pipelines

import (
	"fmt"
	"strconv"
	"strings"
)

// Lookup returns the parameter an override key names in p and its value there:
// key is what [Options.Set] takes (epochs, limit, start_epoch, start_at,
// resources.KEY, source.KEY, sink.KEY, stages.N.KEY or NODE.KEY). Front-ends
// take their flags' defaults and ranges from it, so that a flag and the
// pipeline file cannot disagree.
func (p *Pipeline) Lookup(key string) (Param, any, error) {
	head, rest, dotted := strings.Cut(key, ".")
	find := func(params []Param, cfg *Config, name, what string) (Param, any, error) {
		for _, pr := range params {
			if pr.Name == name {
				return pr, cfg.Value(name), nil
			}
		}
		return Param{}, nil, fmt.Errorf("%s has no parameter %q", what, name)
	}
	if !dotted {
		return find(topParams, p.top, key, "a pipeline file's top level")
	}
	if head == "resources" {
		return find(resourceParams, p.res, rest, "resources")
	}
	var c *Component
	switch head {
	case "source":
		c = p.Source
	case "sink":
		c = p.Sink
	case "stages":
		n, k, ok := strings.Cut(rest, ".")
		i, err := strconv.Atoi(n)
		if !ok || err != nil || i < 0 || i >= len(p.Stages) {
			return Param{}, nil, fmt.Errorf("override key %q: stages.N.KEY with N from 0 to %d", key, len(p.Stages)-1)
		}
		c, rest = p.Stages[i], k
	default:
		for _, n := range p.Nodes() {
			if n.Name == head {
				c = n
			}
		}
	}
	if c == nil {
		return Param{}, nil, fmt.Errorf("override key %q: pipeline %s has no node %q", key, p.Name, head)
	}
	return find(c.Kind.Params, c.Config, rest, fmt.Sprintf("%s %q (kind %s)", c.Kind.Role, c.Name, c.Kind.Name))
}

// ParseText converts text as a value of p, checking its type and range as a
// pipeline file's value is checked; the error names the parameter and says
// what it accepts.
func (p Param) ParseText(text string) (any, error) {
	src := &srcText{name: p.Name, lines: []string{text}}
	body, e := parseDoc(src, []byte(text))
	if e != nil {
		return nil, fmt.Errorf("%s: %q is not %s", p.Name, text, want(p))
	}
	v, e := convert(p, value{node: body, src: src}, func(string) (string, bool) { return "", false })
	if e != nil {
		return nil, fmt.Errorf("%s", e.Msg)
	}
	return v, nil
}
