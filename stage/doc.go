// Package stage defines psiflow's typed stage contract and its built-in
// combinators.
//
// A [Stage] turns a stream of In into a stream of Out. It reads from an [In]
// port and writes to an [Out] port; both are typed, so a graph that wires a
// stage producing []byte into one expecting image.Image does not compile.
// Nothing on the data path is typed as any. Most pipelines never name a
// Stage: package flow's Map, OrderedMap, Filter, Batch, Tap and Sink build
// these combinators from a stream.
//
// # Combinators
//
//   - [Apply]: a map over N workers, in input order or in completion order;
//     one worker loop behind every map.
//   - [Filter]: keep the inputs a predicate accepts.
//   - [FlatMap]: zero or more outputs per input, emitted as they are made.
//   - [Batch]: group inputs into slices by count, and optionally by time.
//   - [Tap]: observe elements without changing them.
//   - [New]: any other stage, written against the ports.
//
// A combinator whose configuration cannot work (workers < 1, a batch size
// of 0) implements [Validator]; flow reports the error from Graph.Run,
// naming the stage, before anything runs.
//
// # Ownership
//
// Every element travels in an [Envelope] that pairs the value with a
// [Claim], its handle: the bytes of graph budget it holds and the resource it
// owns when the value is a [Releaser] (a UMA lease, a pooled buffer). One
// rule holds for every stage and sink: the graph releases the handle when the
// element is consumed (a sink's function returned, a map's function
// returned), dropped (a filter said no) or discarded (an error or a
// cancellation), and user functions never call Release.
//
//   - A map's output keeps its input's claim, so the bytes reserved at the
//     source travel to the sink. The input's resource is released when the
//     function returns, unless the function calls [Keep]: its output shares
//     the input's memory, and both are released when the output ends.
//   - A batch's claim holds its members' claims; dropping it releases every
//     member, without looking inside the slice.
//   - The outputs of a flat-map share their input's claim.
//   - A value sent by a stage written with [New] becomes owned by the claim
//     it is sent with ([Out.Send]).
//
// The deprecated [Map], [ParMap] and [OrderedParMap] keep their old rule:
// their function owns its input and releases it or carries it into its
// output.
//
// # Failures
//
// A panic in user code becomes a [*PanicError] naming the stage and carrying
// the stack; the graph (package flow) returns it as the stage's error.
//
// A function may instead skip a bad element: under a [SkipPolicy] (stop by
// default, or skip within a count and a rate), [Skipper.Handle] logs the
// element and returns a [*SkipError], and [Map], [ParMap] and
// [OrderedParMap] drop it, return its claim, count it in
// [Metrics.Skipped] and go on, keeping order.
//
// # What this package does not own
//
// Wiring stages into graphs, queues, the byte budget, fan-out and merge,
// cancellation and metrics export belong to package flow. This package only
// records per-stage counters in [Metrics], which flow exports.
package stage
