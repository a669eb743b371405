package stage

import (
	"reflect"
	"sync/atomic"
)

// Releaser is implemented by values that own a resource which must be given
// back exactly once when the element's life ends (a UMA byte lease, a pooled
// buffer). See the package documentation for who calls Release.
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

// Claim is a reference-counted hold on bytes of a graph's byte budget. A nil
// *Claim is valid and holds nothing, so graphs without a budget pay nothing.
type Claim struct {
	refs  atomic.Int32
	n     int64
	owner BudgetReleaser
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

// Drop removes a reference; the last one returns the bytes to the budget.
// Dropping more often than retained panics: it would corrupt the budget.
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

// Envelope is an element on an edge: the value and the budget it holds.
type Envelope[T any] struct {
	Value T
	Claim *Claim
}

// Discard ends an element's life: it releases the value if it is a
// [Releaser], then drops the claim.
func Discard[T any](e Envelope[T]) {
	// The resource goes back before the budget does, so the budget never
	// admits new bytes while the old ones are still held.
	ReleaseValue(e.Value)
	e.Claim.Drop()
}

// ReleaseValue calls Release on v if it is a [Releaser]; if v is a slice or
// array (a batch), it releases every member that is one.
func ReleaseValue[T any](v T) {
	x := any(v)
	if r, ok := x.(Releaser); ok {
		r.Release()
		return
	}
	if x != nil {
		if k := reflect.TypeOf(x).Kind(); k == reflect.Slice || k == reflect.Array {
			releaseMembers(reflect.ValueOf(x))
		}
	}
}

func releaseMembers(rv reflect.Value) {
	for i := range rv.Len() {
		m := rv.Index(i)
		switch m.Kind() {
		case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func:
			if m.IsNil() {
				continue
			}
		case reflect.Slice, reflect.Array:
			if !m.CanInterface() {
				continue
			}
			if _, ok := m.Interface().(Releaser); !ok {
				releaseMembers(m)
				continue
			}
		}
		if m.CanInterface() {
			if r, ok := m.Interface().(Releaser); ok {
				r.Release()
			}
		}
	}
}

// MayRelease reports whether values of type T can hold [Releaser]s: T
// implements it, T is an interface type whose dynamic values might, or T is a
// slice or array of such (a batch). Graphs use it to skip the per-element
// check for plain value types.
func MayRelease[T any]() bool { return mayRelease(reflect.TypeFor[T]()) }

func mayRelease(t reflect.Type) bool {
	switch {
	case t.Kind() == reflect.Interface || t.Implements(releaserType):
		return true
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return mayRelease(t.Elem())
	}
	return false
}

var releaserType = reflect.TypeFor[Releaser]()

// MaySize reports whether values of type T can be [Sized].
func MaySize[T any]() bool {
	t := reflect.TypeFor[T]()
	return t.Kind() == reflect.Interface || t.Implements(reflect.TypeFor[Sized]())
}

// SizeOf returns v's size if it is [Sized], else 0.
func SizeOf[T any](v T) int64 {
	if s, ok := any(v).(Sized); ok {
		return s.Size()
	}
	return 0
}
