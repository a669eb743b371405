package flow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/psiflow/psiflow/flow"
)

// closeFunc is an io.Closer from a function.
type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// TestClosesAfterStages: what a graph owns is closed once, after every stage
// has ended, on success, on a stage's error, on a construction error, and its
// error is joined to Run's; a second Run closes nothing again.
func TestClosesAfterStages(t *testing.T) {
	for _, tc := range []struct {
		name     string
		build    func(g *flow.Graph, ended *atomic.Bool)
		closeErr error
		want     []string // substrings of Run's error ("" alone: nil)
	}{
		{name: "ok", build: func(g *flow.Graph, ended *atomic.Bool) {
			flow.Sink(flow.FromSlice(g, "n", []int{1, 2}), "s", func(context.Context, int) error { ended.Store(true); return nil })
		}},
		{name: "stage error", build: func(g *flow.Graph, ended *atomic.Bool) {
			flow.Sink(flow.FromSlice(g, "n", []int{1}), "s", func(context.Context, int) error { ended.Store(true); return errors.New("boom") })
		}, closeErr: errors.New("close failed"), want: []string{`sink "s": boom`, `graph "g": closing what it owns: close failed`}},
		{name: "construction error", build: func(g *flow.Graph, ended *atomic.Bool) {
			ended.Store(true)
			flow.FromSlice(g, "n", []int{1})
		}, want: []string{"not consumed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ended atomic.Bool
			closes := 0
			g := flow.New("g", flow.Closes(closeFunc(func() error {
				closes++
				if !ended.Load() {
					t.Error("closed before the stages ended")
				}
				return tc.closeErr
			})))
			tc.build(g, &ended)
			err := g.Run(context.Background())
			if len(tc.want) == 0 && err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Run: %v, want it to contain %q", err, w)
				}
			}
			if tc.closeErr != nil && !errors.Is(err, tc.closeErr) {
				t.Errorf("Run: %v does not wrap the closer's error", err)
			}
			g.Run(context.Background())
			if closes != 1 {
				t.Errorf("closed %d times, want 1", closes)
			}
		})
	}
	g := flow.New("nil", flow.Closes(nil))
	flow.Sink(flow.FromSlice(g, "n", []int{1}), "s", func(context.Context, int) error { return nil })
	if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "nil closer") {
		t.Fatalf("Closes(nil): Run = %v", err)
	}
}
