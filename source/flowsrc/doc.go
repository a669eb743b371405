// Package flowsrc exposes psiflow datasets as typed sources of a flow graph.
//
// It owns only the adaptation: admission through the graph's gate and byte
// budget, emission, and shutdown. Reading, sharding, shuffling and resume
// are package source's; wiring and running graphs are package flow's.
//
// # Admission
//
// For every element the source first reserves a permit of the graph's gate
// ([flow.Emitter.Reserve] with zero bytes), then calls the iterator's Next,
// which charges the element's bytes to the byte budget before it takes a
// buffer and submits the read (files) or when the element leaves the
// iterator (tar shards, tables), and finally emits the element; the permit
// is released once it is queued. The graph's budget is used unless
// [source.Options.Budget] names another one, and the read buffers of the
// graph's runtime (flow.WithRuntime with package memory's runtime) unless
// [source.Options.Buffers] names others. Elements release their buffers
// and bytes when the graph releases them (they are [stage.Releaser]s), so a
// finished or cancelled graph leaves the budget at zero.
//
// Reads run ahead of emission by at most Workers × QueueDepth elements (file
// datasets) or min(QueueDepth, 8) chunks (tar shards). Setting
// [source.Options.Gate] to the graph's own gate additionally gates every
// read; give that gate enough permits for the read-ahead plus one.
//
// # Shutdown
//
// A source whose graph is cancelled closes its iterator, which cancels the
// reads in flight and waits for the kernel to let go of them. It waits at
// most [CloseGrace]: a read that storage does not answer is then named in
// the log and left behind, and the graph ends without it.
package flowsrc
