package flow

import "context"

// Gate admits work at a graph's sources. Admission has two phases: a source
// first acquires a permit from the gate, then takes buffers (byte budget), then
// submits the element; the permit is released once the element is submitted.
// Nobody waits on the gate while holding buffers, so a gate that closes under
// memory pressure cannot deadlock a graph. Package pressure provides a gate
// driven by the kernel's PSI signal.
type Gate interface {
	// Acquire waits for a permit or returns ctx's error.
	Acquire(ctx context.Context) error
	// Release returns a permit taken by Acquire.
	Release()
}

// Gate returns the graph's gate ([WithGate]), or nil if it has none. Sources that
// read ahead (package source's readers) pass their reads through it as well.
func (g *Graph) Gate() Gate { return g.gate }
