package flow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/psiflow/psiflow/stage"
)

// DefaultQueueSize is the capacity of an edge when no [QueueSize] is given.
const DefaultQueueSize = 16

// Graph is a set of stages wired by bounded queues. Build it with [Source],
// [Via], [Sink] and the fan-out and merge functions, then call [Graph.Run]
// once. Construction mistakes (a stream used twice or never, duplicate names)
// are reported by Run, naming the stage.
type Graph struct {
	name      string
	budget    *Budget
	gate      Gate
	rt        Runtime
	ownBudget bool // WithBudget, WithSharedBudget or WithGate was given
	queueSize int
	registry  prometheus.Registerer

	closers []io.Closer // Closes: closed when Run returns

	mu       sync.Mutex
	nodes    []*node
	edges    []*edgeInfo
	names    map[string]bool
	buildErr []error
	ran      bool
}

// node is one running unit of a graph: a source, a stage, a sink, a fan-out or a merge.
type node struct {
	name    string
	kind    string
	metrics *stage.Metrics
	run     func(ctx context.Context) error
	// closeOutputs closes the node's output channels after run returns.
	closeOutputs func()
}

// edgeInfo describes one queue for metrics and for draining after a run.
type edgeInfo struct {
	name  string
	depth func() int
	cap   int
	// drain discards what is left in the queue once every node has ended.
	drain func()
	used  bool
	from  string
}

// Option configures a [Graph].
type Option func(*Graph)

// WithBudget limits the graph's bytes in flight to a new budget of limit bytes.
// A limit that is not positive is reported by Run.
func WithBudget(limit int64) Option {
	return func(g *Graph) {
		b, err := NewBudget(limit)
		if err != nil {
			g.buildErr = append(g.buildErr, fmt.Errorf("graph %q: %w", g.name, err))
			return
		}
		g.budget, g.ownBudget = b, true
	}
}

// WithSharedBudget makes the graph draw on b, which other graphs may share.
// A nil b is reported by Run.
func WithSharedBudget(b *Budget) Option {
	return func(g *Graph) {
		if b == nil {
			g.buildErr = append(g.buildErr, fmt.Errorf("graph %q: shared budget is nil", g.name))
			return
		}
		g.budget, g.ownBudget = b, true
	}
}

// WithGate makes every source acquire a permit from gate before it reserves
// bytes and produces an element (see [Gate]).
func WithGate(gate Gate) Option { return func(g *Graph) { g.gate, g.ownBudget = gate, true } }

// WithQueueSize sets the default capacity of the graph's edges.
func WithQueueSize(n int) Option { return func(g *Graph) { g.queueSize = n } }

// WithRegistry exports the graph's metrics (see [Graph.Collector]) on r while it runs.
func WithRegistry(r prometheus.Registerer) Option { return func(g *Graph) { g.registry = r } }

// Closes hands c to the graph: [Graph.Run] closes it when it returns,
// whatever it returns (a construction error included), after every stage has
// ended, and joins c's error to its own. It is how a graph owns what was made
// for it alone (package memory's NewGraph gives it its runtime this way).
// A nil c is reported by Run.
func Closes(c io.Closer) Option {
	return func(g *Graph) {
		if c == nil {
			g.buildErr = append(g.buildErr, fmt.Errorf("graph %q: Closes: nil closer", g.name))
			return
		}
		g.closers = append(g.closers, c)
	}
}

// New returns an empty graph. name labels its metrics.
func New(name string, opts ...Option) *Graph {
	g := &Graph{name: name, queueSize: DefaultQueueSize, names: map[string]bool{}}
	for _, o := range opts {
		o(g)
	}
	if g.queueSize < 1 {
		g.errorf("graph %q: queue size %d must be at least 1", name, g.queueSize)
		g.queueSize = 1
	}
	if g.rt != nil {
		if g.ownBudget {
			g.errorf("graph %q: WithRuntime gives the graph its budget and gate: drop WithBudget, WithSharedBudget and WithGate", name)
		}
		g.budget, g.gate = g.rt.Budget(), g.rt.Gate()
		if g.budget == nil {
			g.errorf("graph %q: the runtime has no budget", name)
		}
	}
	return g
}

// Name returns the graph's name.
func (g *Graph) Name() string { return g.name }

// Budget returns the graph's byte budget, or nil if it has none.
func (g *Graph) Budget() *Budget { return g.budget }

func (g *Graph) errorf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buildErr = append(g.buildErr, fmt.Errorf(format, args...))
}

// addNode registers a node, checking its name is unique.
func (g *Graph) addNode(n *node) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n.name == "" {
		g.buildErr = append(g.buildErr, fmt.Errorf("graph %q: a %s has an empty name", g.name, n.kind))
	} else if g.names[n.name] {
		g.buildErr = append(g.buildErr, fmt.Errorf("graph %q: two stages are named %q", g.name, n.name))
	}
	g.names[n.name] = true
	n.metrics = &stage.Metrics{}
	g.nodes = append(g.nodes, n)
}

// Stream is the typed output of a node, waiting to be consumed by exactly one
// other node. Its element type is checked at compile time against the stage
// that consumes it.
type Stream[T any] struct {
	g    *Graph
	ch   chan stage.Envelope[T]
	info *edgeInfo
}

// newStream makes the queue leaving node from.
func newStream[T any](g *Graph, from string, size int) Stream[T] {
	if size <= 0 {
		size = g.queueSize
	}
	ch := make(chan stage.Envelope[T], size)
	info := &edgeInfo{
		from:  from,
		cap:   size,
		depth: func() int { return len(ch) },
		drain: func() {
			for {
				select {
				case e, ok := <-ch:
					if !ok {
						return
					}
					stage.Discard(e)
				default:
					return
				}
			}
		},
	}
	g.mu.Lock()
	g.edges = append(g.edges, info)
	g.mu.Unlock()
	return Stream[T]{g: g, ch: ch, info: info}
}

// Graph returns the graph s belongs to, or nil for the zero Stream. A step
// written outside package flow (a function from a stream to a stream, such as
// stage/decode's Images) reads the graph's budget, gate or runtime through it.
func (s Stream[T]) Graph() *Graph { return s.g }

// consume marks s as used by node to, returning false (and recording an
// error) if it was already used or is the zero Stream.
func (s Stream[T]) consume(to string) bool {
	if s.g == nil {
		return false
	}
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if s.info.used {
		s.g.buildErr = append(s.g.buildErr, fmt.Errorf("graph %q: the output of %q is consumed twice (by %q too); use Broadcast or RoundRobin to fan out", s.g.name, s.info.from, to))
		return false
	}
	s.info.used = true
	s.info.name = s.info.from + "->" + to
	return true
}

// NodeOption configures one node.
type NodeOption func(*nodeConfig)

type nodeConfig struct{ queueSize int }

// QueueSize sets the capacity of the queue leaving this node.
func QueueSize(n int) NodeOption { return func(c *nodeConfig) { c.queueSize = n } }

func configure(opts []NodeOption) nodeConfig {
	var c nodeConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Via runs st on the elements of in and returns its output stream. It is the
// way to add a custom stage ([stage.New]) or a ready one (decode.NewStage);
// [Map], [OrderedMap], [Filter], [FlatMap], [Batch] and [Tap] cover the
// common ones. A stage whose configuration is wrong ([stage.Validator]) is
// reported by [Graph.Run], naming it.
func Via[I, O any](in Stream[I], st stage.Stage[I, O], opts ...NodeOption) Stream[O] {
	g := in.g
	name := st.Name()
	if g == nil {
		panic(fmt.Sprintf("flow.Via(%q): input stream is the zero Stream", name))
	}
	cfg := configure(opts)
	in.consume(name)
	out := newStream[O](g, name, cfg.queueSize)
	n := &node{name: name, kind: "stage"}
	g.addNode(n)
	if v, ok := st.(stage.Validator); ok {
		if err := v.Validate(); err != nil {
			g.errorf("graph %q: stage %q: %v", g.name, name, err)
		}
	}
	n.run = func(ctx context.Context) error {
		return st.Run(ctx, stage.NewIn(in.ch, n.metrics), stage.NewOut(out.ch, n.metrics))
	}
	n.closeOutputs = func() { close(out.ch) }
	return out
}

// Sink consumes in, calling fn for every element in order. When fn returns,
// the graph releases the element's handle: its budget bytes and its
// resources (for a batch, every member's). fn never releases it, and must not
// keep the value beyond the call: copy what must outlive it.
func Sink[T any](in Stream[T], name string, fn func(ctx context.Context, v T) error) {
	if fn == nil && in.g != nil {
		in.g.errorf("graph %q: sink %q: no function", in.g.name, name)
	}
	addSink(in, name, "flow.Sink", func(ctx context.Context, port stage.In[T], e stage.Envelope[T]) error {
		defer port.Discard(e) // also when fn panics
		return fn(ctx, e.Value)
	})
}

// addSink adds a node that passes every element of in to consume, which
// owns it; caller names the public function in the zero-Stream panic.
func addSink[T any](in Stream[T], name, caller string, consume func(ctx context.Context, port stage.In[T], e stage.Envelope[T]) error) {
	g := in.g
	if g == nil {
		panic(fmt.Sprintf("%s(%q): input stream is the zero Stream", caller, name))
	}
	in.consume(name)
	n := &node{name: name, kind: "sink"}
	g.addNode(n)
	n.run = func(ctx context.Context) error {
		port := stage.NewIn(in.ch, n.metrics)
		for {
			e, ok := port.Recv(ctx)
			if !ok {
				return nil
			}
			if err := consume(ctx, port, e); err != nil {
				return err
			}
		}
	}
}

// StageError is the error of one stage, returned by [Graph.Run].
type StageError struct {
	Stage string // the stage's name
	Kind  string // source, stage, sink, fan-out or merge
	Err   error  // what the stage returned (a *stage.PanicError for a panic)
}

func (e *StageError) Error() string { return fmt.Sprintf("%s %q: %v", e.Kind, e.Stage, e.Err) }

// Unwrap returns the stage's own error.
func (e *StageError) Unwrap() error { return e.Err }

// Run runs the graph until every source is exhausted and every element has
// reached a sink, or until the first error, which cancels the whole graph and
// is returned as a [*StageError]. If ctx is cancelled, Run stops every stage
// and returns ctx's error. When Run returns, every goroutine it started has
// ended and every element still queued has been discarded (claims dropped,
// [stage.Releaser] values released). A graph runs once.
func (g *Graph) Run(ctx context.Context) (err error) {
	g.mu.Lock()
	if g.ran {
		g.mu.Unlock()
		return fmt.Errorf("graph %q: Run called twice", g.name)
	}
	g.ran = true
	defer func() {
		// Last: after the stages, the runtime's supervision and the metrics.
		for i := len(g.closers) - 1; i >= 0; i-- {
			if cerr := g.closers[i].Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("graph %q: closing what it owns: %w", g.name, cerr))
			}
		}
	}()
	for _, e := range g.edges {
		if !e.used {
			g.buildErr = append(g.buildErr, fmt.Errorf("graph %q: the output of %q is not consumed; end it with Sink", g.name, e.from))
		}
	}
	if len(g.nodes) == 0 {
		g.buildErr = append(g.buildErr, fmt.Errorf("graph %q: no stages", g.name))
	}
	buildErr := errors.Join(g.buildErr...)
	g.mu.Unlock()
	if buildErr != nil {
		return buildErr
	}

	if g.registry != nil {
		c := g.Collector()
		if err := g.registry.Register(c); err != nil {
			return fmt.Errorf("graph %q: registering metrics: %w", g.name, err)
		}
		defer g.registry.Unregister(c)
	}
	if g.rt != nil {
		return g.rt.Supervise(ctx, g, g.run)
	}
	return g.run(ctx)
}

// run runs every node until the first error or the end, then drains the queues.
func (g *Graph) run(ctx context.Context) error {
	eg, gctx := errgroup.WithContext(ctx)
	for _, n := range g.nodes {
		eg.Go(func() error {
			// A context per node gives each its own Done channel: selecting on
			// one channel shared by every goroutine of the graph would make
			// them contend for its lock on every blocking queue operation.
			nctx, cancel := context.WithCancel(gctx)
			defer cancel()
			n.metrics.Start(1)
			err := stage.Protect(n.name, func() error { return n.run(nctx) })
			n.metrics.Stop()
			if n.closeOutputs != nil {
				n.closeOutputs()
			}
			if err != nil {
				n.metrics.Errors.Add(1)
				if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
					return err
				}
				return &StageError{Stage: n.name, Kind: n.kind, Err: err}
			}
			return nil
		})
	}
	err := eg.Wait()
	for _, e := range g.edges {
		e.drain()
	}
	if ctx.Err() != nil {
		var se *StageError
		if err == nil || !errors.As(err, &se) || errors.Is(err, ctx.Err()) {
			return ctx.Err()
		}
	}
	return err
}
