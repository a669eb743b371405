package tensor

import (
	"context"
	"sync"

	"github.com/psiflow/psiflow/stage"
)

// Batches returns a stage that groups its samples by size, in order, and
// collates each group into one [*Batch] (the last may be smaller): it is
// stage.Batch and [Collate] in one stage, so a pipeline adds batching and
// collation in one step (flow.Via(images, tensor.Batches("batch", 64))). What
// each does is unchanged: the batch waits for size samples (no timeout; for
// one, use flow.Batch and Collate), fails instead of hanging when it holds
// the whole byte budget, the graph releases the samples once they are copied
// and the batch when its life ends. A size below one is reported when the
// stage is added to a graph.
//
//	in:  -- s1 - s2 - s3 --|
//	Batches(size 2)
//	out: ------- [2 …] ---- [1 …]|
func Batches(name string, size int) stage.Stage[*Sample, *Batch] {
	return batches{name: name, batch: stage.Batch[*Sample](name, size, 0), collate: Collate(name)}
}

// batches runs a batch stage and a collate stage joined by a queue of one.
type batches struct {
	name    string
	batch   stage.Stage[*Sample, []*Sample]
	collate stage.Stage[[]*Sample, *Batch]
}

func (b batches) Name() string { return b.name }

// Validate checks the batch size.
func (b batches) Validate() error {
	if v, ok := b.batch.(stage.Validator); ok {
		return v.Validate()
	}
	return nil
}

// Run batches in on one goroutine and collates on this one. An error of either
// stops the other; the queue between them is emptied (its batches discarded)
// before Run returns.
func (b batches) Run(ctx context.Context, in stage.In[*Sample], out stage.Out[*Batch]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := make(chan stage.Envelope[[]*Sample], 1)
	m := &stage.Metrics{} // the queue's counters: the stage's own are in and out's
	var (
		once  sync.Once
		first error // the first error of either side; the other's is then its cancellation
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		if err != nil {
			once.Do(func() { first = err; cancel() })
		}
	}
	wg.Go(func() {
		defer close(q)
		fail(stage.Protect(b.name, func() error { return b.batch.Run(ctx, in, stage.NewOut(q, m)) }))
	})
	fail(stage.Protect(b.name, func() error { return b.collate.Run(ctx, stage.NewIn(q, m), out) }))
	cancel()
	wg.Wait()
	for e := range q {
		stage.Discard(e)
	}
	return first
}
