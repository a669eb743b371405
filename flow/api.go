package flow

import (
	"context"
	"time"

	"github.com/psiflow/psiflow/stage"
)

// Map applies f to every element of in on workers goroutines at once and
// returns the stream of results, in the order they complete. The graph
// releases each input's resources when f returns (f never does); if the
// result shares the input's memory, f calls [stage.Keep] and the input lives
// as long as the result. workers < 1 is reported by [Graph.Run], naming the
// stage.
//
//	in:  -- 1 -- 2 -- 3 --|
//	Map(x => x*10, slow on 1, 2 workers)
//	out: ------ 20 - 30 - 10 --|
func Map[I, O any](in Stream[I], name string, workers int, f func(ctx context.Context, v I) (O, error), opts ...NodeOption) Stream[O] {
	return Via(in, stage.Apply(name, workers, false, f), opts...)
}

// OrderedMap is [Map] with the results in input order: a result ready before
// its predecessors waits for them.
//
//	in:  -- 1 -- 2 -- 3 --|
//	OrderedMap(x => x*10, slow on 1, 2 workers)
//	out: ---------- 10 - 20 - 30 --|
func OrderedMap[I, O any](in Stream[I], name string, workers int, f func(ctx context.Context, v I) (O, error), opts ...NodeOption) Stream[O] {
	return Via(in, stage.Apply(name, workers, true, f), opts...)
}

// Filter passes on the elements of in for which keep returns true, in order;
// the graph ends the others.
//
//	in:  -- 1 -- 2 -- 3 -- 4 --|
//	Filter(even)
//	out: ------- 2 ------- 4 --|
func Filter[T any](in Stream[T], name string, keep func(ctx context.Context, v T) (bool, error), opts ...NodeOption) Stream[T] {
	return Via(in, stage.Filter(name, keep), opts...)
}

// FlatMap calls f for every element of in; f emits zero or more outputs,
// which are sent on as they are emitted.
//
//	in:  -- "a b" ------ "c" --|
//	FlatMap(split)
//	out: -- "a" - "b" -- "c" --|
func FlatMap[I, O any](in Stream[I], name string, f func(ctx context.Context, v I, emit func(O) error) error, opts ...NodeOption) Stream[O] {
	return Via(in, stage.FlatMap(name, f), opts...)
}

// Batch groups the elements of in into slices of size, in order; with a
// positive maxWait a partial batch also leaves maxWait after its first
// element arrived, and the last partial batch leaves at the end of input. A
// batch holds its members' handles: the graph releases them all when the
// batch ends. size < 1 is reported by [Graph.Run], naming the stage.
//
//	in:  -- 1 - 2 - 3 - 4 - 5 --|
//	Batch(size 2)
//	out: ------ [1 2] - [3 4] - [5]|
func Batch[T any](in Stream[T], name string, size int, maxWait time.Duration, opts ...NodeOption) Stream[[]T] {
	return Via(in, stage.Batch[T](name, size, maxWait), opts...)
}

// Tap calls observe for every element of in and passes it on unchanged.
//
//	in:  -- 1 -- 2 --|
//	Tap(log)
//	out: -- 1 -- 2 --|
func Tap[T any](in Stream[T], name string, observe func(v T), opts ...NodeOption) Stream[T] {
	return Via(in, stage.Tap(name, observe), opts...)
}
