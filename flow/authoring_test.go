package flow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	gsext "github.com/reugn/go-streams/extension"
	gsflow "github.com/reugn/go-streams/flow"

	"github.com/psiflow/psiflow/flow"
)

// The read → parallel map → batch → sink pipeline of docs/AUTHORING.md,
// compiled and run here in psiflow and in go-streams (rill is not a
// dependency; its version in the document is not compiled).

var authoringFiles = []string{"a.jpg", "bb.jpg", "ccc.jpg", "dddd.jpg", "eeeee.jpg"}

// summary is what the sink reports: items, batches and bytes.
type summary struct{ items, batches, bytes int }

func (s *summary) add(b []int) {
	s.batches++
	for _, n := range b {
		s.items, s.bytes = s.items+1, s.bytes+n
	}
}

func (s summary) String() string {
	return fmt.Sprintf("%d items in %d batches, %d bytes", s.items, s.batches, s.bytes)
}

// decodeName stands in for reading and decoding a file.
func decodeName(name string) int { return len(name) }

func Example_readMapBatchSink() {
	var sum summary
	g := flow.New("authoring")
	files := flow.FromSlice(g, "read", authoringFiles)
	sizes := flow.Map(files, "decode", 4, func(_ context.Context, name string) (int, error) {
		return decodeName(name), nil
	})
	batches := flow.Batch(sizes, "batch", 2, 0)
	flow.Sink(batches, "train", func(_ context.Context, b []int) error {
		sum.add(b)
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println(sum)
	// Output: 5 items in 3 batches, 35 bytes
}

func TestAuthoringGoStreams(t *testing.T) {
	var sum summary
	in := make(chan any)
	go func() {
		for _, f := range authoringFiles {
			in <- f
		}
		close(in)
	}()
	out := make(chan any)
	go gsext.NewChanSource(in).
		Via(gsflow.NewMap(decodeName, 4)).
		Via(gsflow.NewBatch[int](2, time.Hour)).
		To(gsext.NewChanSink(out))
	for x := range out {
		b, ok := x.([]int)
		if !ok {
			t.Fatalf("element of type %T", x)
		}
		sum.add(b)
	}
	if got := sum.String(); got != "5 items in 3 batches, 35 bytes" {
		t.Fatalf("go-streams: %s", got)
	}
}
