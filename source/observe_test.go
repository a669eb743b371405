package source

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// recordObserver records every ObserveRead.
type recordObserver struct {
	mu    sync.Mutex
	reads int
	bytes int
	errs  int
	seen  map[Backend]int
	neg   bool
}

func (o *recordObserver) ObserveRead(b Backend, n int, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[Backend]int{}
	}
	o.seen[b]++
	o.reads++
	o.bytes += n
	if err != nil {
		o.errs++
	}
	if d < 0 {
		o.neg = true
	}
}

func TestReadObserverSeesEveryRead(t *testing.T) {
	dir := t.TempDir()
	for _, b := range backends(t) {
		t.Run(string(b), func(t *testing.T) {
			path, data := writeFile(t, dir, "obs-"+string(b), 100_000, 3)
			obs := &recordObserver{}
			r, err := NewReader(ReaderOptions{Backend: b, QueueDepth: 4, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Backend() != b {
				t.Fatalf("backend %s, want %s", r.Backend(), b)
			}
			f, err := r.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			const chunk = 16 << 10
			tags := map[int]bool{}
			for i, off := 0, 0; off < len(data); i, off = i+1, off+chunk {
				if err := r.Submit(Request{File: f, Off: int64(off), Buf: make([]byte, chunk), Tag: i}); err != nil {
					t.Fatal(err)
				}
				tags[i] = true
			}
			comps := make([]Completion, 8)
			for r.InFlight() > 0 {
				n, err := r.Reap(context.Background(), comps, 1)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range comps[:n] {
					i, ok := c.Tag.(int)
					if !ok || !tags[i] {
						t.Fatalf("completion tag %#v: not the caller's", c.Tag)
					}
					delete(tags, i)
				}
			}
			if len(tags) != 0 {
				t.Fatalf("reads never completed: %v", tags)
			}
			if obs.reads != 7 || obs.bytes != len(data) || obs.errs != 0 || obs.seen[b] != 7 || obs.neg {
				t.Errorf("observer saw %+v, want 7 reads of %d bytes by %s", obs, len(data), b)
			}
			// A failed read is reported as one: a closed file cannot be submitted.
			f.Close()
			if err := r.Submit(Request{File: f, Buf: make([]byte, 10)}); err == nil {
				t.Fatal("submit on a closed file succeeded")
			}
			if obs.errs != 1 {
				t.Errorf("errors observed %d, want 1", obs.errs)
			}
		})
	}
}

func TestNoObserverNoWrapper(t *testing.T) {
	r, err := NewReader(ReaderOptions{Backend: BackendPread})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.(*observedReader); ok {
		t.Error("a reader without an Observer is wrapped")
	}
}

type nopObserver struct{}

func (nopObserver) ObserveRead(Backend, int, time.Duration, error) {}

// BenchmarkObservedRead is one cached 4 KiB pread, with and without an observer: the
// difference is the wrapper's cost per read.
func BenchmarkObservedRead(b *testing.B) {
	path, _ := writeFile(b, b.TempDir(), "bench", 4096, 1)
	for _, obs := range []ReadObserver{nil, nopObserver{}} {
		b.Run(fmt.Sprintf("observer=%v", obs != nil), func(b *testing.B) {
			r, err := NewReader(ReaderOptions{Backend: BackendPread, Observer: obs})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			f, err := r.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 4096)
			comps := make([]Completion, 1)
			for b.Loop() {
				if err := r.Submit(Request{File: f, Buf: buf}); err != nil {
					b.Fatal(err)
				}
				if _, err := r.Reap(context.Background(), comps, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
