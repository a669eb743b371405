package stage

import (
	"context"
	"fmt"
	"runtime/debug"
)

// Stage is a typed processing step from a stream of I to a stream of O.
//
// Run reads elements from in until it is closed, writes results to out, and
// returns nil, or the first error. It must return promptly once ctx is done.
// It must not close out: the graph does, after Run returns. Run is called once
// per graph run.
type Stage[I, O any] interface {
	// Name identifies the stage in errors and metrics; unique within a graph.
	Name() string
	// Run processes the stream.
	Run(ctx context.Context, in In[I], out Out[O]) error
}

// PanicError is a panic recovered from user code in a stage.
type PanicError struct {
	Stage string // the stage whose code panicked
	Value any    // the value passed to panic
	Stack []byte // the goroutine's stack at the panic
}

// Error names the stage and the panic value; the stack is in Stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("stage %q panicked: %v", e.Stage, e.Value)
}

// Unwrap returns the panic value if it is an error (e.g. a runtime error).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Protect runs fn and turns a panic into a [*PanicError] for the named stage.
// Goroutines that a stage starts must run their work through it.
func Protect(name string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Stage: name, Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// Validator is implemented by stages whose configuration can be wrong (a
// worker count below one, a batch size of zero). Package flow calls Validate
// when the stage is added to a graph, and Graph.Run reports the error naming
// the stage before anything starts.
type Validator interface {
	Validate() error
}

// funcStage adapts a run function to [Stage].
type funcStage[I, O any] struct {
	name     string
	run      func(ctx context.Context, in In[I], out Out[O]) error
	validate func() error
}

func (s funcStage[I, O]) Name() string { return s.name }

func (s funcStage[I, O]) Run(ctx context.Context, in In[I], out Out[O]) error {
	if err := s.Validate(); err != nil {
		return err
	}
	return s.run(ctx, in, out)
}

func (s funcStage[I, O]) Validate() error {
	if s.run == nil {
		return fmt.Errorf("no run function")
	}
	if s.validate != nil {
		return s.validate()
	}
	return nil
}

// New returns a stage named name that runs run. It is the way to write a
// stage the combinators do not cover; run follows the [Stage] contract and
// the ownership rule of the package documentation: an element received and
// not sent on is ended with [In.Discard], and a new value is sent with the
// claim of the input it came from.
func New[I, O any](name string, run func(ctx context.Context, in In[I], out Out[O]) error) Stage[I, O] {
	return funcStage[I, O]{name: name, run: run}
}
