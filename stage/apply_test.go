package stage_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

func ints(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func jitter(i int) {
	if i%7 == 0 {
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	}
}

func TestMapStagesKeepOrFreeOrder(t *testing.T) {
	double := func(_ context.Context, v int) (int, error) { jitter(v); return 2 * v, nil }
	tests := []struct {
		name    string
		st      stage.Stage[int, int]
		ordered bool
	}{
		{"map", stage.Apply("m", 1, true, double), true},
		{"ordered-1", stage.Apply("m", 1, true, double), true},
		{"ordered-4", stage.Apply("m", 4, true, double), true},
		{"ordered-16", stage.Apply("m", 16, true, double), true},
		{"unordered-1", stage.Apply("m", 1, false, double), false},
		{"unordered-4", stage.Apply("m", 4, false, double), false},
		{"unordered-16", stage.Apply("m", 16, false, double), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := flow.New("t")
			var got []int
			flow.Collect(flow.Via(flow.FromSlice(g, "src", ints(500)), tc.st), "sink", &got)
			if err := g.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := make([]int, 500)
			for i := range want {
				want[i] = 2 * i
			}
			if !tc.ordered {
				slices.Sort(got)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %v..., want %v...", got[:min(10, len(got))], want[:10])
			}
		})
	}
}

func TestOrderedApplyReordersOutOfOrderCompletion(t *testing.T) {
	// Element 0 finishes last; the ordered variant must still emit it first,
	// the unordered one must not wait for it.
	release := make(chan struct{})
	slowFirst := func(_ context.Context, v int) (int, error) {
		if v == 0 {
			<-release
		}
		return v, nil
	}
	g := flow.New("t")
	var got []int
	var once sync.Once
	out := flow.Via(flow.FromSlice(g, "src", ints(4)), stage.Apply("m", 4, true, slowFirst))
	flow.Sink(out, "sink", func(_ context.Context, v int) error { got = append(got, v); return nil })
	go func() {
		// Let the others finish first; closing is safe whenever it happens.
		time.Sleep(5 * time.Millisecond)
		once.Do(func() { close(release) })
	}()
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("ordered output %v", got)
	}

	release2 := make(chan struct{})
	g2 := flow.New("t2")
	var got2 []int
	out2 := flow.Via(flow.FromSlice(g2, "src", ints(4)), stage.Apply("m", 4, false, func(_ context.Context, v int) (int, error) {
		if v == 0 {
			<-release2
		}
		return v, nil
	}))
	flow.Sink(out2, "sink", func(_ context.Context, v int) error {
		got2 = append(got2, v)
		if len(got2) == 3 {
			close(release2) // 1, 2, 3 arrived while 0 was still blocked
		}
		return nil
	})
	if err := g2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got2[3] != 0 {
		t.Fatalf("unordered output %v: element 0 should come last", got2)
	}
}
