package flow

import (
	"context"
	"fmt"
)

// Runtime is what a graph runs under, attached once with [WithRuntime]: it
// gives the graph its byte budget and its gate, and [Graph.Run] runs the graph
// through [Runtime.Supervise], which starts and stops whatever watches the
// graph. Package memory's Runtime is the one psiflow ships (a budget that
// follows the cgroup's headroom, the pressure gate and its monitor, read
// pools, shed actions, the epoch boundary); flow knows nothing of it but this
// interface.
type Runtime interface {
	// Budget is the byte budget the graph draws on, shared by every graph of
	// the runtime (never nil).
	Budget() *Budget
	// Gate admits work at the graph's sources, or is nil for none.
	Gate() Gate
	// Supervise is called by Graph.Run with the graph and the function that
	// runs its stages. It calls run once (or returns an error without calling
	// it), and returns only when run and everything it started for the graph
	// have ended: run's error, or the runtime's own reason to stop the graph,
	// for which it may cancel run's context. Users call Graph.Run, never
	// Supervise.
	Supervise(ctx context.Context, g *Graph, run func(ctx context.Context) error) error
}

// WithRuntime runs the graph under rt: the graph takes rt's budget and gate,
// and [Graph.Run] runs through rt.Supervise. It replaces WithBudget,
// WithSharedBudget and WithGate: giving one of them as well is an error
// reported by Run, as is a nil rt.
func WithRuntime(rt Runtime) Option {
	return func(g *Graph) {
		if rt == nil {
			g.buildErr = append(g.buildErr, fmt.Errorf("graph %q: runtime is nil", g.name))
			return
		}
		g.rt = rt
	}
}

// Runtime returns the graph's runtime ([WithRuntime]), or nil. Stages that
// need more of it than the budget and the gate (package source's readers take
// its read buffers) assert the interface they need.
func (g *Graph) Runtime() Runtime { return g.rt }
