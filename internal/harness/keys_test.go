package harness

import (
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// batch is a batch event with keys.
func batch(keys ...string) protocol.Event {
	return protocol.Event{Event: protocol.Batch, N: len(keys), Keys: keys}
}

func epochEnd(n int) protocol.Event { return protocol.Event{Event: protocol.Epoch, Epoch: n} }

func start(files int64) protocol.Event {
	return protocol.Event{Event: protocol.Start, Files: files}
}

func TestCheckKeys(t *testing.T) {
	tests := []struct {
		name     string
		events   []protocol.Event
		finished bool
		want     KeyCheck
		once     bool
	}{
		{name: "no keys", events: []protocol.Event{{Event: protocol.Batch, N: 4}}, want: KeyCheck{}},
		{name: "epoch events, exactly once", finished: true, once: true,
			events: []protocol.Event{batch("a", "b"), batch("c"), epochEnd(1), batch("c", "a"), batch("b"), epochEnd(2)},
			want:   KeyCheck{Reported: true, Delivered: 6, Epochs: 2, Complete: 2, By: "epoch events"}},
		{name: "epoch events, the last one ended by done", finished: true, once: true,
			events: []protocol.Event{batch("a", "b"), epochEnd(1), batch("b", "a")},
			want:   KeyCheck{Reported: true, Delivered: 4, Epochs: 2, Complete: 2, By: "epoch events"}},
		{name: "epoch events, a duplicate and a skip", finished: true,
			events: []protocol.Event{batch("a", "b", "c"), epochEnd(1), batch("a", "a"), batch("c"), epochEnd(2)},
			want:   KeyCheck{Reported: true, Delivered: 6, Epochs: 2, Complete: 2, Duplicates: 1, Missing: 1, FirstDuplicate: "a", FirstMissing: "b", By: "epoch events"}},
		{name: "epoch events, stopped mid-epoch: the open epoch is not missing anything", finished: false, once: true,
			events: []protocol.Event{batch("a", "b", "c"), epochEnd(1), batch("a")},
			want:   KeyCheck{Reported: true, Delivered: 4, Epochs: 2, Complete: 1, By: "epoch events"}},
		{name: "by position, exactly once", finished: true, once: true,
			events: []protocol.Event{start(3), batch("a", "b"), batch("c", "c"), batch("a", "b")},
			want:   KeyCheck{Reported: true, Delivered: 6, Epochs: 2, Complete: 2, By: "position"}},
		{name: "by position, one delivered twice shifts the epochs", finished: true,
			// Epoch 1 gets a, b, b; epoch 2 gets c, a, b: one duplicate, one missing (c in epoch 1).
			events: []protocol.Event{start(3), batch("a", "b", "b"), batch("c", "a", "b")},
			want:   KeyCheck{Reported: true, Delivered: 6, Epochs: 2, Complete: 2, Duplicates: 1, Missing: 1, FirstDuplicate: "b", FirstMissing: "c", By: "position"}},
		{name: "by position, the start's files against what came", finished: true,
			events: []protocol.Event{start(4), batch("a", "b", "c")},
			want:   KeyCheck{Reported: true, Delivered: 3, Epochs: 1, Complete: 1, Missing: 1, By: "position"}},
		{name: "by occurrence", finished: true,
			events: []protocol.Event{batch("a", "b"), batch("a", "b", "a")},
			// a: epochs 1, 2, 3; b: 1, 2: epoch 3 misses b.
			want: KeyCheck{Reported: true, Delivered: 5, Epochs: 3, Complete: 3, Missing: 1, FirstMissing: "b", By: "occurrence"}},
		{name: "unkeyed batches cannot be checked", finished: true,
			events: []protocol.Event{batch("a"), {Event: protocol.Batch, N: 2}},
			want:   KeyCheck{Reported: true, Delivered: 1, Unkeyed: 2, Epochs: 1, Complete: 1, By: "occurrence"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckKeys(tt.events, tt.finished)
			if got != tt.want {
				t.Errorf("CheckKeys = %+v\nwant          %+v", got, tt.want)
			}
			ok, known := got.ExactlyOnce()
			if known != tt.want.Reported || ok != tt.once {
				t.Errorf("ExactlyOnce = %v, %v; want %v, %v", ok, known, tt.once, tt.want.Reported)
			}
		})
	}
}

func TestPauses(t *testing.T) {
	ev := func(kind string, t float64) protocol.Event { return protocol.Event{Event: kind, T: t} }
	tests := []struct {
		name   string
		events []protocol.Event
		n      int
		paused time.Duration
	}{
		{"none", []protocol.Event{ev(protocol.Batch, 1), ev(protocol.Done, 2)}, 0, 0},
		{"two pauses", []protocol.Event{ev(protocol.Pause, 1), ev(protocol.Resume, 3.5), ev(protocol.Batch, 4), ev(protocol.Pause, 5), ev(protocol.Resume, 6)}, 2, 3500 * time.Millisecond},
		{"a repeated pause counts once", []protocol.Event{ev(protocol.Pause, 1), ev(protocol.Pause, 2), ev(protocol.Resume, 3)}, 1, 2 * time.Second},
		{"ended paused", []protocol.Event{ev(protocol.Pause, 1), ev(protocol.Done, 11)}, 1, 10 * time.Second},
		{"a resume without a pause", []protocol.Event{ev(protocol.Resume, 1)}, 0, 0},
	}
	for _, tt := range tests {
		n, paused := Pauses(tt.events)
		if n != tt.n || (paused-tt.paused).Abs() > time.Microsecond {
			t.Errorf("%s: %d pauses, %v; want %d, %v", tt.name, n, paused, tt.n, tt.paused)
		}
	}
}
