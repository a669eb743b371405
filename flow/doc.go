// Package flow wires typed stages into graphs and runs them with three kinds
// of backpressure.
//
// # Building a graph
//
// A [Graph] starts with sources ([Source], [FromSlice], [FromChan],
// [FromOutlet]); every step then takes the stream before it and a name and
// returns the next stream: [Map] and [OrderedMap] (a function on N workers),
// [Filter], [FlatMap], [Batch], [Tap], and [Via] for a ready or custom
// [stage.Stage]. It may fan out ([Broadcast], [RoundRobin]) and merge
// ([Merge]), and ends in sinks ([Sink], [Collect], [ToInlet]). Types are
// inferred, so a step whose input type does not match its upstream's output
// does not compile. Every stream must be consumed exactly once.
//
// # Configuration
//
// Building a graph never fails on the spot and never panics on bad
// arguments: a wiring mistake (a stream used twice or never, two stages
// with one name) or a bad argument (workers < 1, a batch size of 0, a
// budget that is not positive) is recorded where it is made, and
// [Graph.Run] returns them all, naming each stage, before it starts
// anything. Objects made on their own ([NewBudget]) return an error from
// their constructor.
//
// # Ownership
//
// An element's budget bytes and its resource (a value with a Release
// method) are one handle, a [stage.Claim]. The graph releases it when the
// element is consumed (a sink's or a map's function returned), dropped (a
// filter) or discarded (an error, a cancellation); a batch releases all its
// members. User functions never call Release; a map whose result points into
// its input calls [stage.Keep]. [Collect] and [ToInlet] hand values out of
// the graph with their resources.
//
// # Backpressure
//
//  1. Count: every edge is a bounded queue ([WithQueueSize], [QueueSize]).
//  2. Bytes: a graph-wide [Budget] ([WithBudget]). A source reserves bytes
//     before it produces an element ([Emitter.Reserve]); the bytes travel with
//     the element as a [stage.Claim] through every stage and come back when the
//     element is consumed by a sink, dropped by a filter, or discarded.
//  3. Pressure: a [Gate] ([WithGate]) admits work at sources; package
//     pressure drives one from the kernel's PSI signal. Admission is two-phase:
//     permit, then budget and buffers, then submit, so nobody waits on the gate
//     while holding buffers.
//
// A graph usually takes all of them from its runtime, attached once with
// [WithRuntime]: the runtime gives the budget and the gate, and Run runs the
// graph through [Runtime.Supervise], which starts and stops what watches it
// (package memory's runtime: the pressure monitor, the headroom, the read
// pools, the epoch boundary). A graph that owns what was made for it (package
// memory's NewGraph: a runtime for that graph alone) closes it when Run
// returns ([Closes]).
//
// # Running
//
// [Graph.Run] runs every node on its own goroutine (parallel stages run more).
// The first error cancels the graph and is returned as a [*StageError] naming
// the stage; a panic in user code arrives as a [*stage.PanicError] with its
// stack. Cancelling the context stops every stage promptly. When Run returns,
// every goroutine it started has ended and everything left in queues has been
// discarded, so the budget is back to zero.
//
// # Metrics
//
// [Graph.Collector] exports per-stage counters (items, bytes, errors, busy
// time, time waiting on input and on output), per-edge queue depth and budget
// use to Prometheus under names that start with psiflow_; [WithRegistry]
// registers them for the run. [Graph.Stats] gives the same counters for
// progress displays.
//
// # go-streams
//
// [FromOutlet], [ToInlet] and [ViaFlow] connect graphs to
// github.com/reugn/go-streams components, checking element types at the
// boundary (a [*TypeError], never a panic) and draining go-streams outlets on
// early exit so their goroutines end.
//
// # What this package does not own
//
// The stage contract and combinators are in package stage; reading files,
// decoding, memory ownership (uma) and PSI (pressure) live in their own
// packages and plug in through [Source], [Gate], [Runtime] and [stage.Releaser].
package flow
