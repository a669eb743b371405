// Package throttle plugs psiflow's pressure gate into flow graphs: the throttle
// stage at the head of a graph.
//
// A [Throttle] owns a [pressure.Gate], a [pressure.Model] and a
// [pressure.Recorder]. [Throttle.Option] installs the gate as the graph's gate
// (flow.WithGate), so every source takes a permit before it reserves bytes and
// buffers (two-phase admission: nothing waits on the gate while holding buffers).
// [Throttle.Run] opens the pressure sources the host allows ([pressure.Open]) and
// runs the monitor beside the graph for exactly as long as the graph runs.
//
// # What it owns
//
// The wiring between package pressure (which knows nothing of graphs) and package
// flow (which knows nothing of PSI), and the lifetime of the monitor.
//
// # What it does not own
//
// PSI sources, the level model and the gate policy (package pressure); graphs,
// queues and the byte budget (package flow); what is shed on Critical (callbacks
// registered with [Throttle.OnShed]).
package throttle
