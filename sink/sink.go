package sink

import (
	"context"
	"sync/atomic"

	"github.com/psiflow/psiflow/tensor"
)

// Sink is where batches go. Consume is called from one goroutine and must be
// done with b's memory when it returns; Close ends the sink (cause nil: a clean
// end) and may be called more than once.
type Sink interface {
	Consume(ctx context.Context, b *tensor.Batch) error
	Close(cause error) error
}

// Null counts batches and drops them: the sink for measuring a pipeline alone.
type Null struct {
	batches, samples, bytes atomic.Int64
}

// NewNull returns a [Null] sink.
func NewNull() *Null { return &Null{} }

// Consume counts b.
func (n *Null) Consume(_ context.Context, b *tensor.Batch) error {
	n.batches.Add(1)
	n.samples.Add(int64(len(b.Keys)))
	n.bytes.Add(b.Size())
	return nil
}

// Close does nothing; it returns nil.
func (n *Null) Close(error) error { return nil }

// Counts returns the batches, samples and tensor bytes consumed so far.
func (n *Null) Counts() (batches, samples, bytes int64) {
	return n.batches.Load(), n.samples.Load(), n.bytes.Load()
}
