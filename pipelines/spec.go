package pipelines

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"sync"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

// Role says where a kind goes in a file.
type Role int

// The roles.
const (
	SourceRole Role = iota
	StageRole
	SinkRole
)

func (r Role) String() string {
	switch r {
	case SourceRole:
		return "source"
	case StageRole:
		return "stage"
	case SinkRole:
		return "sink"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// AnyType as a sink's In accepts every element type.
const AnyType = "any"

// BuildFunc constructs one node of a graph: a source ignores in and returns its
// output, a stage returns the stream that follows in, a sink consumes in and
// returns the zero Stream.
type BuildFunc func(b *Build, cfg *Config, in Stream) (Stream, error)

// Kind is one registered source, stage or sink kind.
type Kind struct {
	Name string
	Role Role
	Doc  string
	// In and Out name the element types read and written ("" where the role has
	// none; a sink's In may be [AnyType]).
	In, Out string
	Params  []Param
	Build   BuildFunc
	// Floor, when set, adds the node's part of the pipeline's floor (its
	// smallest working set that still makes progress) to f, once per run
	// before the memory runtime is made (b has no graph and no runtime then).
	Floor func(b *Build, cfg *Config, f *Floor) error
	// Check, when set, reports a combination of the node's parameters that
	// cannot work (each one in its range), when the file is validated: before
	// anything runs, at the node's line.
	Check func(cfg *Config) error
	// Device marks a kind that works on a device (the pin, h2d and
	// mark_preemptible stages): a pipeline with one needs resources.device
	// auto, cuda or sim, and device cuda or sim needs one.
	Device bool
}

// Param returns the parameter called name.
func (k *Kind) Param(name string) (Param, bool) {
	for _, p := range k.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// ElemType is a registered element type: a Go type flowing on an edge, with the
// typed fan-out, merge and sink operations graphs built from files need.
type ElemType struct {
	Name, Doc string
	goType    reflect.Type
	broadcast func(s any, name string, n int) []any
	roundRob  func(s any, name string, n int) []any
	merge     func(name string, ss []any) any
	sink      func(s any, name string, fn func(ctx context.Context, v any) error)
	count     func(v any) (items, bytes int64)
	limit     func(s any, name string, n int64) any
	cut       func(v any, keep int64)
	// broadcastable is false for Releasers that are not Retainers: their
	// resources cannot be shared by several readers.
	broadcastable bool
}

// NewType declares an element type of Go type T; count says how many samples and
// payload bytes one element holds (for progress and limits).
func NewType[T any](name, doc string, count func(T) (items, bytes int64)) *ElemType {
	t := &ElemType{
		Name: name, Doc: doc, goType: reflect.TypeFor[T](),
		broadcast: func(s any, name string, n int) []any {
			return wrapAll(flow.Broadcast(s.(flow.Stream[T]), name, n))
		},
		roundRob: func(s any, name string, n int) []any {
			return wrapAll(flow.RoundRobin(s.(flow.Stream[T]), name, n))
		},
		merge: func(name string, ss []any) any {
			ins := make([]flow.Stream[T], len(ss))
			for i, s := range ss {
				ins[i] = s.(flow.Stream[T])
			}
			return flow.Merge(ins, name)
		},
		sink: func(s any, name string, fn func(ctx context.Context, v any) error) {
			flow.Sink(s.(flow.Stream[T]), name, func(ctx context.Context, v T) error { return fn(ctx, v) })
		},
		count: func(v any) (int64, int64) { return count(v.(T)) },
		broadcastable: !reflect.TypeFor[T]().Implements(reflect.TypeFor[stage.Releaser]()) ||
			reflect.TypeFor[T]().Implements(reflect.TypeFor[stage.Retainer]()),
	}
	t.limit = func(s any, name string, n int64) any {
		var seen int64 // a filter runs one element at a time
		return flow.Filter(s.(flow.Stream[T]), name, func(_ context.Context, v T) (bool, error) {
			if seen >= n {
				return false, nil // the graph releases it
			}
			items, _ := count(v)
			if seen+items > n && t.cut != nil {
				t.cut(v, n-seen)
				items = n - seen
			}
			seen += items
			return true, nil
		})
	}
	return t
}

// WithCut makes t's elements cuttable and returns t: cut keeps the first keep
// samples of v (0 < keep < its count). A pipeline's limit then cuts the element
// that reaches it, so exactly limit samples are delivered; elements of a type
// without a cut are delivered whole, the last one possibly beyond the limit.
func (t *ElemType) WithCut(cut func(v any, keep int64)) *ElemType { t.cut = cut; return t }

// Broadcastable reports whether several readers can each get every element
// (fanout: broadcast); elements owning buffers without reference counts cannot.
func (t *ElemType) Broadcastable() bool { return t.broadcastable }

func wrapAll[T any](ss []flow.Stream[T]) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// GoType is the Go type of the elements.
func (t *ElemType) GoType() reflect.Type { return t.goType }

// Count returns how many samples and payload bytes v holds.
func (t *ElemType) Count(v any) (items, bytes int64) { return t.count(v) }

// Stream is a typed flow stream with its element type, as builders pass them.
type Stream struct {
	Type *ElemType
	s    any
}

// Wrap makes a Stream of s, whose elements must be of t's Go type.
func Wrap[T any](t *ElemType, s flow.Stream[T]) (Stream, error) {
	if t.goType != reflect.TypeFor[T]() {
		return Stream{}, fmt.Errorf("element type %s is %v, not %v", t.Name, t.goType, reflect.TypeFor[T]())
	}
	return Stream{Type: t, s: s}, nil
}

// Unwrap returns the typed stream inside s.
func Unwrap[T any](s Stream) (flow.Stream[T], error) {
	fs, ok := s.s.(flow.Stream[T])
	if !ok {
		name := "none"
		if s.Type != nil {
			name = s.Type.Name
		}
		return flow.Stream[T]{}, fmt.Errorf("input is %s, not a stream of %v", name, reflect.TypeFor[T]())
	}
	return fs, nil
}

// Sink consumes s with fn, called for every element; the graph releases the
// element when fn returns.
func (s Stream) Sink(name string, fn func(ctx context.Context, v any) error) {
	s.Type.sink(s.s, name, fn)
}

// Registry holds element types and kinds. The zero value is not usable: call
// [NewRegistry] or use [Default]. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	kinds map[string]*Kind
	types map[string]*ElemType
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{kinds: map[string]*Kind{}, types: map[string]*ElemType{}}
}

var (
	defaultOnce sync.Once
	defaultReg  *Registry
)

// Default returns the registry of every built-in element type and kind.
func Default() *Registry {
	defaultOnce.Do(func() {
		defaultReg = NewRegistry()
		if err := RegisterBuiltins(defaultReg); err != nil {
			panic("pipelines: built-in registrations: " + err.Error()) // a bug caught by every test
		}
	})
	return defaultReg
}

// RegisterType adds an element type; its name must be new.
func (r *Registry) RegisterType(t *ElemType) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t == nil || t.Name == "" || t.Doc == "" || t.Name == AnyType {
		return fmt.Errorf("pipelines: element type needs a name (not %q) and a doc line", AnyType)
	}
	if _, dup := r.types[t.Name]; dup {
		return fmt.Errorf("pipelines: element type %q registered twice", t.Name)
	}
	r.types[t.Name] = t
	return nil
}

// Register adds a kind; its name must be new, its element types registered and
// its parameters well declared.
func (r *Registry) Register(k Kind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k.Name == "" || k.Doc == "" || k.Build == nil {
		return fmt.Errorf("pipelines: kind %q needs a name, a doc line and a constructor", k.Name)
	}
	if _, dup := r.kinds[k.Name]; dup {
		return fmt.Errorf("pipelines: kind %q registered twice", k.Name)
	}
	needIn, needOut := k.Role != SourceRole, k.Role != SinkRole
	if (k.In != "") != needIn || (k.Out != "") != needOut {
		return fmt.Errorf("pipelines: kind %q: a %s has %s", k.Name, k.Role, map[Role]string{SourceRole: "an output type and no input", StageRole: "an input and an output type", SinkRole: "an input type and no output"}[k.Role])
	}
	for _, t := range []string{k.In, k.Out} {
		if t == "" || (t == AnyType && k.Role == SinkRole) {
			continue
		}
		if _, ok := r.types[t]; !ok {
			return fmt.Errorf("pipelines: kind %q: element type %q is not registered", k.Name, t)
		}
	}
	seen := map[string]bool{}
	for _, p := range k.Params {
		if seen[p.Name] {
			return fmt.Errorf("pipelines: kind %q: parameter %q declared twice", k.Name, p.Name)
		}
		seen[p.Name] = true
		if err := p.check(); err != nil {
			return fmt.Errorf("pipelines: kind %q: %w", k.Name, err)
		}
	}
	kk := k
	r.kinds[k.Name] = &kk
	return nil
}

// Kind returns the kind called name.
func (r *Registry) Kind(name string) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.kinds[name]
	return k, ok
}

// Type returns the element type called name.
func (r *Registry) Type(name string) (*ElemType, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[name]
	return t, ok
}

// Kinds lists the kinds: sources, then stages, then sinks, each by name.
func (r *Registry) Kinds() []*Kind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role < out[j].Role
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Types lists the element types by name.
func (r *Registry) Types() []*ElemType {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*ElemType, 0, len(r.types))
	for _, t := range r.types {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *Registry) kindNames(role Role) []string {
	var names []string
	for _, k := range r.Kinds() {
		if k.Role == role {
			names = append(names, k.Name)
		}
	}
	return names
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
