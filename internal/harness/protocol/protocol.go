package protocol

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"
)

// ExitBelowFloor is the exit status of a loader that stopped on its own because its
// cgroup left it less than its floor (psiflow's -below-floor stop): it yielded to
// the co-tenant with a message instead of being OOM-killed.
const ExitBelowFloor = 3

// Event names the harness acts on.
const (
	// Batch reports one batch delivered to the consumer; N is its size.
	Batch = "batch"
	// Done is the loader's last line; Samples is its own total, Error non-empty on failure.
	Done = "done"
	// Ramp is a co-tenant's progress while it ramps its memory: Bytes touched so far.
	Ramp = "ramp"
	// Held is a co-tenant's line once it has touched all its Bytes and starts holding
	// them.
	Held = "held"
	// Fell is a spiking co-tenant's line once it has given back its memory down to
	// Bytes after holding its peak.
	Fell = "fell"
	// Start is a loader's first line; Files (the samples of one epoch) and Epochs,
	// when known, let the harness check that every sample arrived exactly once.
	Start = "start"
	// Epoch ends epoch number Epoch (counted from 1): the batches since the previous
	// epoch event belong to it.
	Epoch = "epoch"
	// Pause says the loader stopped admitting reads because its cgroup left it less
	// than its floor: its consumer waits from now on. Resume says it goes on.
	Pause  = "pause"
	Resume = "resume"
)

// Event is one protocol line.
type Event struct {
	// Event is the kind: [Batch], [Done], or anything else (ignored).
	Event string `json:"event"`
	// N is the number of samples in a batch event.
	N int `json:"n,omitempty"`
	// T is seconds since the loader started.
	T float64 `json:"t"`
	// Samples is the loader's own count of samples delivered (done events).
	Samples int64 `json:"samples,omitempty"`
	// Error, in a done event, says why the loader gave up.
	Error string `json:"error,omitempty"`
	// Bytes, in ramp and held events of a co-tenant, is the anonymous memory it has
	// touched; in a fell event what it still holds; in a trainer's ballast event its
	// ballast.
	Bytes int64 `json:"bytes,omitempty"`
	// Keys, in a batch event, are its samples' keys (file paths), in order; a batch
	// with keys has N equal to their number.
	Keys []string `json:"keys,omitempty"`
	// Epoch numbers the epoch an epoch event ends, from 1.
	Epoch int `json:"epoch,omitempty"`
	// Files and Epochs, in a start event, are the samples of one epoch and the
	// number of epochs the loader will run (0: not said).
	Files  int64 `json:"files,omitempty"`
	Epochs int   `json:"epochs,omitempty"`
}

// Parse decodes one line. ok is false for lines that are not protocol lines (blank,
// not a JSON object, or without an "event" field); those are not errors, since loaders
// may print other things. A protocol line with impossible values (a batch with n < 0,
// a time that is negative or not finite) is an error.
func Parse(line []byte) (ev Event, ok bool, err error) {
	s := strings.TrimSpace(string(line))
	if !strings.HasPrefix(s, "{") {
		return Event{}, false, nil
	}
	if err := json.Unmarshal([]byte(s), &ev); err != nil || ev.Event == "" {
		return Event{}, false, nil
	}
	if math.IsNaN(ev.T) || math.IsInf(ev.T, 0) || ev.T < 0 {
		return ev, true, fmt.Errorf("protocol: %s event: bad time %v in %q", ev.Event, ev.T, s)
	}
	if ev.Event == Batch && ev.N < 0 {
		return ev, true, fmt.Errorf("protocol: batch event: negative size %d in %q", ev.N, s)
	}
	if ev.Bytes < 0 {
		return ev, true, fmt.Errorf("protocol: %s event: negative bytes %d in %q", ev.Event, ev.Bytes, s)
	}
	if ev.Event == Batch && len(ev.Keys) > 0 && len(ev.Keys) != ev.N {
		return ev, true, fmt.Errorf("protocol: batch event: %d keys for n %d in %.200q", len(ev.Keys), ev.N, s)
	}
	if ev.Event == Epoch && ev.Epoch < 1 {
		return ev, true, fmt.Errorf("protocol: epoch event: epoch %d, want ≥ 1 in %q", ev.Epoch, s)
	}
	if ev.Files < 0 || ev.Epochs < 0 {
		return ev, true, fmt.Errorf("protocol: %s event: negative files %d or epochs %d in %q", ev.Event, ev.Files, ev.Epochs, s)
	}
	return ev, true, nil
}

// Emitter writes protocol lines for a Go loader. Times are measured from the
// Emitter's creation. It is safe for concurrent use; each line is written with one
// Write call.
type Emitter struct {
	mu      sync.Mutex
	w       io.Writer
	start   time.Time
	samples int64
	err     error
}

// NewEmitter returns an emitter writing to w (usually os.Stdout, which is unbuffered in
// Go) whose clock starts now.
func NewEmitter(w io.Writer) *Emitter {
	return &Emitter{w: w, start: time.Now()}
}

// Batch reports a batch of n samples delivered now.
func (e *Emitter) Batch(n int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.samples += int64(n)
	return e.emit(Event{Event: Batch, N: n})
}

// BatchKeys reports a batch delivered now whose samples have keys (file paths), in
// order; the harness checks with them that every sample arrives exactly once.
func (e *Emitter) BatchKeys(keys []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.samples += int64(len(keys))
	return e.emit(Event{Event: Batch, N: len(keys), Keys: keys})
}

// EndEpoch reports that epoch n (counted from 1) has ended.
func (e *Emitter) EndEpoch(n int) error {
	return e.Emit(Event{Event: Epoch, Epoch: n})
}

// Done writes the final line with the total of the batches reported; cause, if not nil,
// becomes its error field.
func (e *Emitter) Done(cause error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev := Event{Event: Done, Samples: e.samples}
	if cause != nil {
		ev.Error = cause.Error()
	}
	return e.emit(ev)
}

// Emit writes ev with its time set to now; it is for events other than batch and done
// (a co-tenant's [Ramp] and [Held]).
func (e *Emitter) Emit(ev Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.emit(ev)
}

// Samples returns the total of the batches reported so far.
func (e *Emitter) Samples() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.samples
}

func (e *Emitter) emit(ev Event) error {
	if e.err != nil {
		return e.err
	}
	// Microseconds are plenty and keep the lines short.
	ev.T = math.Round(time.Since(e.start).Seconds()*1e6) / 1e6
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("protocol: encode %s event: %w", ev.Event, err)
	}
	if _, err := e.w.Write(append(b, '\n')); err != nil {
		e.err = fmt.Errorf("protocol: write %s event: %w", ev.Event, err)
		return e.err
	}
	return nil
}
