package flow_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/reugn/go-streams/extension"
	gsflow "github.com/reugn/go-streams/flow"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

func anyChan(vs ...any) chan any {
	ch := make(chan any, len(vs))
	for _, v := range vs {
		ch <- v
	}
	close(ch)
	return ch
}

func TestFromOutletTyped(t *testing.T) {
	src := extension.NewChanSource(anyChan(1, 2, 3))
	g := flow.New("t")
	var got []int
	flow.Collect(flow.FromOutlet[int](g, "gs", src), "sink", &got)
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("got %v", got)
	}
}

func TestFromOutletWrongTypeIsAnError(t *testing.T) {
	// A go-streams Map keeps running behind the source; the graph must fail
	// with a TypeError and drain the Map so its goroutine ends (goleak checks).
	src := extension.NewChanSource(anyChan(1, 2, "three", 4, 5))
	m := gsflow.NewMap(func(x any) any { return x }, 1)
	g := flow.New("t")
	var got []int
	flow.Collect(flow.FromOutlet[int](g, "gs", src.Via(m)), "sink", &got)
	err := g.Run(context.Background())
	var te *flow.TypeError
	if !errors.As(err, &te) || te.Index != 2 || te.Got != "string" || te.Want != "int" {
		t.Fatalf("Run returned %v; want TypeError at element 2", err)
	}
}

func TestViaGoStreamsFlowAndIntoSink(t *testing.T) {
	g := flow.New("t", flow.WithBudget(1000))
	src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
		for i := range 20 {
			if err := out.Reserve(ctx, 10); err != nil {
				return err
			}
			if err := out.Emit(ctx, i); err != nil {
				return err
			}
		}
		return nil
	})
	toStr := gsflow.NewMap(func(v int) string { return strconv.Itoa(v * 10) }, 1)
	strs := flow.ViaFlow[int, string](src, "gs-map", toStr)
	batches := flow.Via(strs, stage.Batch[string]("batch", 5, 0))
	out := make(chan any, 10)
	flow.ToInlet(batches, "gs-sink", extension.NewChanSink(out))
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for x := range out {
		got = append(got, x.([]string))
	}
	if len(got) != 4 || got[0][1] != "10" || got[3][4] != "190" {
		t.Fatalf("got %v", got)
	}
	if g.Budget().InUse() != 0 {
		t.Fatalf("budget in use: %d", g.Budget().InUse())
	}
}

func TestGoStreamsCancelDrains(t *testing.T) {
	// An endless feed into a go-streams Map whose output we read; cancelling
	// the graph must close the Map's input and drain its output.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := flow.New("t")
	src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
		for i := 0; ; i++ {
			if err := out.Emit(ctx, i); err != nil {
				return err
			}
		}
	})
	m := gsflow.NewMap(func(v int) int { return v }, 2)
	n := 0
	flow.Sink(flow.ViaFlow[int, int](src, "gs", m), "sink", func(context.Context, int) error {
		if n++; n == 100 {
			cancel()
		}
		return nil
	})
	if err := runWithin(t, g, ctx, "after cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}
