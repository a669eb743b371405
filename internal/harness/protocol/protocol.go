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
	// touched.
	Bytes int64 `json:"bytes,omitempty"`
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
