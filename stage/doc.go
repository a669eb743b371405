// Package stage defines psiflow's typed stage contract and its built-in
// combinators.
//
// A [Stage] turns a stream of In into a stream of Out. It reads from an [In]
// port and writes to an [Out] port; both are typed, so a graph that wires a
// stage producing []byte into one expecting image.Image does not compile.
// Nothing on the data path is typed as any.
//
// # Combinators
//
//   - [Map]: one output per input.
//   - [Filter]: keep the inputs a predicate accepts.
//   - [FlatMap]: zero or more outputs per input, emitted as they are made.
//   - [Batch]: group inputs into slices by count, and optionally by time.
//   - [ParMap] and [OrderedParMap]: a map over N workers, in completion order
//     or in input order.
//   - [Tap]: observe elements without changing them.
//
// # Elements and claims
//
// Every element travels in an [Envelope] that pairs the value with a [Claim]:
// the bytes of graph budget the element holds. Combinators carry claims for
// the user: a mapped element keeps its input's claim, a dropped element's claim
// is returned, a batch holds the claims of all its members, and the outputs of
// a flat-map share their input's claim. User functions see only values.
//
// A value that implements [Releaser] owns a resource (a UMA lease, a pooled
// buffer). Whoever ends an element's life calls Release exactly once: a
// filter that drops it, a sink after consuming it, or the graph when it
// discards queued elements on cancellation. A [Map] function owns its input:
// it must release it or carry it into its output. A batch ([]T from [Batch])
// is released member by member, so a sink of batches must not release the
// members itself, and a graph cancelled while batches are queued or being
// gathered releases every member.
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
