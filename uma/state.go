package uma

import (
	"fmt"
	"strings"
)

// State is a chunk's place in the ledger's state machine.
type State uint8

// The chunk states. Their meaning follows TensorCast's ledger; the transitions
// between them are the data in [Transitions].
const (
	// Hot: the bytes are resident, intact and recently written or read.
	Hot State = iota
	// Stable: at least one stable lease holds the chunk resident; it is never
	// marked preemptible or evicted while in this state.
	Stable
	// Cold: resident and intact but not accessed for a while (see [Arena.Cool]);
	// the first candidates for preemption.
	Cold
	// LockedTx: a transfer (host-to-device copy, export) is reading the chunk;
	// it cannot be preempted or evicted.
	LockedTx
	// CopiedGPU: a transfer completed; the device holds a copy, so the host
	// copy may be released according to the arena's [Policy].
	CopiedGPU
	// Preemptible: the pages were handed to the kernel with MADV_FREE. They may
	// or may not still hold the data; re-acquiring proves which (see the package doc).
	Preemptible
	// Evicted: the bytes are known to be gone (MADV_DONTNEED, or found reclaimed
	// without a re-hydrate function). They must be re-hydrated before use.
	Evicted

	numStates = iota
)

var stateNames = [numStates]string{"HOT", "STABLE", "COLD", "LOCKED_TX", "COPIED_GPU", "PREEMPTIBLE", "EVICTED"}

// String returns the ledger spelling of s (HOT, STABLE, ...).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// ParseState parses the ledger spelling of a state (case-insensitive).
func ParseState(s string) (State, error) {
	for i, n := range stateNames {
		if strings.EqualFold(n, s) {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("uma: unknown chunk state %q", s)
}

// States lists every state in declaration order.
func States() []State {
	out := make([]State, numStates)
	for i := range out {
		out[i] = State(i)
	}
	return out
}

// Transition is one allowed edge of the ledger's state machine and why it exists.
type Transition struct {
	From, To State
	// Why names the operation that takes this edge.
	Why string
}

// Transitions is the ledger's state machine, declared as data. Any change of a
// chunk's state that is not listed here is refused with a [*TransitionError].
// Staying in the same state is not a transition and is always allowed.
var Transitions = []Transition{
	{Hot, Stable, "stable lease acquired"},
	{Hot, Cold, "Cool: idle longer than the threshold"},
	{Hot, LockedTx, "transfer begins"},
	{Hot, Preemptible, "MarkPreemptible (MADV_FREE)"},
	{Hot, Evicted, "EvictTail / pool trim (MADV_DONTNEED)"},

	{Cold, Hot, "accessed"},
	{Cold, Stable, "stable lease acquired"},
	{Cold, LockedTx, "transfer begins"},
	{Cold, Preemptible, "MarkPreemptible (MADV_FREE)"},
	{Cold, Evicted, "EvictTail (MADV_DONTNEED)"},

	{Stable, Hot, "last stable lease released"},
	{Stable, LockedTx, "transfer begins"},

	{LockedTx, CopiedGPU, "transfer completed"},
	{LockedTx, Hot, "transfer aborted"},
	{LockedTx, Stable, "transfer ended while stable leases are held"},

	{CopiedGPU, Hot, "accessed or rewritten"},
	{CopiedGPU, Stable, "stable lease acquired"},
	{CopiedGPU, LockedTx, "transfer begins again"},
	{CopiedGPU, Preemptible, "MarkPreemptible / post-GPU-load policy"},
	{CopiedGPU, Evicted, "EvictTail / post-GPU-load EvictCPU"},

	{Preemptible, Hot, "re-acquired: verified intact or re-hydrated"},
	{Preemptible, Evicted, "EvictTail, or reclaimed with no re-hydrate function"},

	{Evicted, Hot, "re-hydrated or rewritten"},
}

// allowed[from][to] is Transitions as a lookup table.
var allowed = func() (t [numStates][numStates]bool) {
	for _, tr := range Transitions {
		t[tr.From][tr.To] = true
	}
	return t
}()

// Allowed reports whether the ledger may move a chunk from one state to another.
func Allowed(from, to State) bool {
	if from == to {
		return true
	}
	if int(from) >= numStates || int(to) >= numStates {
		return false
	}
	return allowed[from][to]
}

// TransitionError is returned when an operation would take a chunk along an
// edge that [Transitions] does not list.
type TransitionError struct {
	Chunk    ChunkID
	From, To State
	// Op is the operation that asked for the transition.
	Op string
}

// Error names the chunk, both states and the operation.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("uma: %s: illegal transition of chunk %s from %s to %s", e.Op, e.Chunk, e.From, e.To)
}

// ChunkID names a chunk: its arena and its index in that arena.
type ChunkID struct {
	Arena string
	Index int
}

// String spells the chunk as arena#index.
func (c ChunkID) String() string { return fmt.Sprintf("%s#%d", c.Arena, c.Index) }
