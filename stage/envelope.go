package stage

import (
	"sync/atomic"
)

// Releaser is implemented by values that own a resource which must be given
// back exactly once when the element's life ends (a UMA byte lease, a pooled
// buffer). The graph calls Release, never user code: see "Ownership" in the
// package documentation.
type Releaser interface {
	Release()
}

// Retainer is implemented by Releaser values that are reference counted:
// Retain adds a reference that a later Release removes. Fan-out to several
// consumers requires it.
type Retainer interface {
	Retain()
}

// Sized is implemented by values that know how many bytes they occupy. Sources
// reserve that many bytes of the graph's budget for such a value, and metrics
// count them. Implement it on pointer or small types: the size is read through
// an interface.
type Sized interface {
	Size() int64
}

// BudgetReleaser is where a [Claim] returns its bytes; flow's Budget implements it.
type BudgetReleaser interface {
	Release(n int64)
}

// BudgetInspector is implemented by budgets (flow's Budget) that let a stage
// which accumulates elements, such as [Batch], tell a wait that can never
// end from a slow source.
type BudgetInspector interface {
	// Limit is the budget's size in bytes.
	Limit() int64
	// InUse is the number of bytes currently held.
	InUse() int64
	// Waiting is the request of the first caller waiting for bytes, or 0.
	Waiting() int64
}

// Claim is an element's handle: the bytes of a graph's byte budget it holds
// and the resource it owns (its value, when that is a [Releaser]), released
// together, the resource first, when the last reference is dropped. A batch's
// claim holds its members' claims. A nil *Claim is valid and holds nothing, so
// graphs without a budget and values without resources pay nothing.
type Claim struct {
	refs  atomic.Int32
	n     int64
	owner BudgetReleaser
	res   Releaser
	parts []*Claim
}

// NewClaim returns a claim on n bytes that gives them back to owner when its
// last reference is dropped.
func NewClaim(owner BudgetReleaser, n int64) *Claim {
	c := &Claim{n: n, owner: owner}
	c.refs.Store(1)
	return c
}

// JoinClaims returns one claim that holds all of parts (taking over the
// caller's reference to each); dropping it drops them all. Nil parts are
// skipped; it returns nil when nothing remains.
func JoinClaims(parts []*Claim) *Claim {
	var kept []*Claim
	var n int64
	for _, p := range parts {
		if p != nil {
			kept = append(kept, p)
			n += p.Bytes()
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	c := &Claim{n: n, parts: kept}
	c.refs.Store(1)
	return c
}

// Bytes is the number of budget bytes the claim holds (0 for nil).
func (c *Claim) Bytes() int64 {
	if c == nil {
		return 0
	}
	return c.n
}

// Retain adds a reference; it returns c for convenience.
func (c *Claim) Retain() *Claim {
	if c != nil {
		c.refs.Add(1)
	}
	return c
}

// Drop removes a reference; the last one releases the resource and returns
// the bytes to the budget. Dropping more often than retained panics: it would
// corrupt the budget.
func (c *Claim) Drop() {
	if c == nil {
		return
	}
	switch r := c.refs.Add(-1); {
	case r > 0:
		return
	case r < 0:
		panic("stage: Claim dropped more times than retained")
	}
	// The resource goes back before the budget does, so the budget never
	// admits new bytes while the old ones are still held.
	if r := c.res; r != nil {
		c.res = nil
		r.Release()
	}
	if c.parts != nil {
		for _, p := range c.parts {
			p.Drop()
		}
		return
	}
	if c.owner != nil {
		c.owner.Release(c.n)
	}
}

// hold makes c (which the caller holds one reference to) also own r, and
// returns the claim to send on: c itself when it is the caller's alone and
// owns nothing yet, else a new claim holding both.
func hold(c *Claim, r Releaser) *Claim {
	if c != nil && c.res == nil && c.refs.Load() == 1 {
		c.res = r
		return c
	}
	h := &Claim{n: c.Bytes(), res: r}
	if c != nil {
		h.parts = []*Claim{c}
	}
	h.refs.Store(1)
	return h
}

// owns reports whether c's own resource is r.
func (c *Claim) owns(r Releaser) (same bool) {
	if c == nil || c.res == nil {
		return false
	}
	defer func() {
		if recover() != nil { // values of an incomparable type: not the same
			same = false
		}
	}()
	return c.res == r
}

// settle ends the resources of an element that was consumed while its bytes
// travel on (a map's input, whose output keeps its claim): release calls
// Release, otherwise ownership passed to someone else and they are only
// forgotten. Only parts held by this element alone are touched: a part shared
// with other elements (the input of a flat-map) ends with the last of them.
func (c *Claim) settle(release bool) {
	if c == nil || c.refs.Load() != 1 {
		return
	}
	if r := c.res; r != nil {
		c.res = nil
		if release {
			r.Release()
		}
	}
	for _, p := range c.parts {
		p.settle(release)
	}
}

// budgetOwner returns the budget c's bytes go back to, if any.
func (c *Claim) budgetOwner() BudgetReleaser {
	if c == nil {
		return nil
	}
	if c.owner != nil {
		return c.owner
	}
	for _, p := range c.parts {
		if o := p.budgetOwner(); o != nil {
			return o
		}
	}
	return nil
}

// Envelope is an element on an edge: the value and its handle.
//
// A stage written with [New] that makes a new value sends it in a new
// Envelope with the input's claim; [Out.Send] then adds the value's resource
// to the claim. An element passed on unchanged is sent as it was received.
type Envelope[T any] struct {
	Value T
	Claim *Claim
	// held is set once Claim owns Value's resource (by Out.Send).
	held bool
}

// Discard ends an element's life: its claim is dropped, which releases its
// resources and returns its bytes. The value of an envelope that was never
// sent is released too when it is a [Releaser].
func Discard[T any](e Envelope[T]) {
	if !e.held {
		if r, ok := any(e.Value).(Releaser); ok && !isNilPointer(r) && !e.Claim.owns(r) {
			r.Release()
		}
	}
	e.Claim.Drop()
}

// ReleaseValue calls Release on v if it is a [Releaser].
//
// Deprecated: the graph releases every element (see "Ownership" in the
// package documentation); user code has no need to. Batches are released
// through their members' claims, not by looking inside the slice.
func ReleaseValue[T any](v T) {
	if r, ok := any(v).(Releaser); ok {
		r.Release()
	}
}

// MayRelease reports whether values of type T can be [Releaser]s: T
// implements it or is an interface type whose dynamic values might. Ports use
// it to skip the per-element check for plain value types.
func MayRelease[T any]() bool {
	var zero T
	if _, ok := any(zero).(Releaser); ok {
		return true
	}
	return isInterface[T]()
}

// MaySize reports whether values of type T can be [Sized].
func MaySize[T any]() bool {
	var zero T
	if _, ok := any(zero).(Sized); ok {
		return true
	}
	return isInterface[T]()
}

// isInterface reports whether T is an interface type.
func isInterface[T any]() bool {
	return any(*new(T)) == nil // only an interface type's zero value is a nil any
}

// SizeOf returns v's size if it is [Sized], else 0.
func SizeOf[T any](v T) int64 {
	if s, ok := any(v).(Sized); ok {
		return s.Size()
	}
	return 0
}

// Detach hands the resources that c alone owns to the caller: they will not
// be released when c is dropped. Sinks that pass elements out of the graph
// (flow's Collect, ToInlet) call it; c itself still holds its bytes.
func Detach(c *Claim) { c.settle(false) }

// Copies returns n envelopes for e's value, one per consumer of a fan-out.
// Each holds a reference to e's claim (whose bytes come back with the last
// copy) and, when the value is a [Releaser] and a [Retainer], its own
// reference to the value, retained n-1 times. It takes over the caller's
// reference to e.
func Copies[T any](e Envelope[T], n int) []Envelope[T] {
	out := make([]Envelope[T], n)
	if n == 0 {
		Discard(e)
		return out
	}
	c := e.Claim
	var res Releaser
	if c != nil && c.refs.Load() == 1 {
		res, c.res = c.res, nil
	}
	if res == nil {
		for i := range out {
			if i > 0 {
				c.Retain()
			}
			out[i] = Envelope[T]{Value: e.Value, Claim: c, held: true}
		}
		return out
	}
	rt, _ := res.(Retainer)
	for i := range out {
		if i > 0 {
			c.Retain()
			if rt != nil {
				rt.Retain()
			}
		}
		h := &Claim{n: c.Bytes(), res: res, parts: []*Claim{c}}
		h.refs.Store(1)
		out[i] = Envelope[T]{Value: e.Value, Claim: h, held: true}
	}
	return out
}
