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
