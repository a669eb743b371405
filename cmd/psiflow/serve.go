package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/internal/frontend"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/tensor"
)

func init() {
	register(command{name: "serve", summary: "serve batches to a Python training loop (python/psiflow) over a Unix socket and shared memory", run: runServe})
}

// serveConfig is what `psiflow serve` was asked for.
type serveConfig struct {
	socket        string
	slots         int
	keys          bool
	acceptTimeout time.Duration
	plan          bool
	// consumerEpochs: after each epoch, the consumer asks for the next one.
	consumerEpochs bool
	// p is the image pipeline (pipelines/imagefolder.yaml with the flags as
	// overrides), nil with -synthetic; process and option come with its flags.
	p       *pipelines.Pipeline
	process memory.ProcessActions
	option  func(node, param string) string
	// synthetic: batches of known bytes instead of a folder (tests of the Python module).
	synthetic  int
	shape      []int
	failAfter  int
	pauseAfter int
}

func parseServe(args []string) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("psiflow serve", flag.ContinueOnError)
	ff := frontend.Register(fs) // the image pipeline's flags, the same as demo's and psiflow-imagefolder's
	fs.StringVar(&c.socket, "socket", "", "Unix socket to listen on (required); python/psiflow's Client connects to it")
	flagval.IntVar(fs, &c.slots, "slots", 0, 0, 1<<10, "batches outstanding in Python at once (the shared-memory ring's length); 0: sized from the first batch, as many as fit in 64 MiB, 2 to 4")
	fs.BoolVar(&c.keys, "keys", false, "send each sample's file path with the batch")
	flagval.DurationVar(fs, &c.acceptTimeout, "accept-timeout", time.Minute, time.Millisecond, 24*time.Hour, "give up when no consumer connects within this time")
	fs.BoolVar(&c.plan, "plan", false, "send each epoch's plan (samples, rank's share, start) before its batches, as a \"plan\" message (python/psiflow's DataLoader asks for it)")
	fs.BoolVar(&c.consumerEpochs, "consumer-epochs", false, "after each epoch, send \"epoch_end\" and wait for the consumer to ask for the next one (its number and start) instead of running -epochs; the run ends when the consumer closes (python/psiflow's DataLoader runs all its epochs over one psiflow serve this way, its sample cache and shared ring with them)")
	flagval.IntVar(fs, &c.synthetic, "synthetic", 0, 0, 1<<30, "serve this many synthetic batches of known bytes instead of a folder (for tests)")
	shape := fs.String("shape", "4,3,8,8", "with -synthetic: batch shape (samples first), uint8")
	flagval.IntVar(fs, &c.failAfter, "fail-after", 0, 0, 1<<30, "with -synthetic: fail after this many batches (tests the error path)")
	flagval.IntVar(fs, &c.pauseAfter, "pause-after", 0, 0, 1<<30, "with -synthetic: announce a pause and its resume after this many batches (tests the \"pause\" messages)")
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if c.socket == "" {
		return c, fmt.Errorf("%w: -socket is required", errUsage)
	}
	if ff.IsSet("data") == (c.synthetic > 0) {
		return c, fmt.Errorf("%w: give exactly one of -data DIR and -synthetic N", errUsage)
	}
	for _, f := range strings.Split(*shape, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 1 {
			return c, fmt.Errorf("%w: -shape %q: want positive integers separated by commas", errUsage, *shape)
		}
		c.shape = append(c.shape, d)
	}
	if c.synthetic == 0 {
		p, err := ff.Pipeline()
		if err != nil {
			return c, fmt.Errorf("%w: %v", errUsage, err)
		}
		c.p, c.process, c.option = p, ff.Process(), ff.Option
	}
	return c, nil
}

func runServe(ctx context.Context, stdout io.Writer, args []string) error {
	c, err := parseServe(args)
	if err != nil {
		return err
	}
	// The socket is made in accept, once the start-up checks passed: a client
	// could otherwise connect (the kernel queues it) to a server about to fail.
	t, err := sink.NewTorch(sink.TorchConfig{Socket: c.socket, Slots: c.slots, Keys: c.keys, ListenOnAccept: true})
	if err != nil {
		return err
	}
	pauses := newPauseAnnouncer(ctx, t)
	defer pauses.close()
	accept := func() error {
		// Said only here, once the start-up checks passed (Hooks.Ready): a
		// consumer, or a script that waits for this line, then meets a loader
		// that really serves, not one about to fail its checks.
		if err := t.Listen(); err != nil {
			return err
		}
		if c.slots > 0 {
			fmt.Fprintf(stdout, "psiflow serve: listening on %s (%d slots)\n", c.socket, c.slots)
		} else {
			fmt.Fprintf(stdout, "psiflow serve: listening on %s (slots sized from the first batch: as many as fit in 64 MiB, 2 to 4)\n", c.socket)
		}
		actx, cancel := context.WithTimeout(ctx, c.acceptTimeout)
		defer cancel()
		if err := t.Accept(actx); err != nil {
			return err
		}
		pauses.connected()
		return nil
	}
	if c.synthetic > 0 {
		if err = accept(); err == nil {
			err = serveSynthetic(ctx, c, t, pauses)
		}
	} else {
		// The consumer is accepted once the pipeline's start-up checks passed
		// (the memory limit, the file list, the rank's share): a run that cannot
		// start says so at once, not after a consumer connected.
		err = serveFolder(ctx, c, t, stdout, accept, pauses)
	}
	// The pause messages still queued go before the sink's end or error.
	pauses.close()
	sent, released := t.Counts()
	if errors.Is(err, sink.ErrConsumerClosed) {
		fmt.Fprintf(stdout, "psiflow serve: the consumer stopped after %d batches\n", sent)
		return t.Close(nil)
	}
	closeSink := t.Close
	if sig := stoppedBy(ctx, err); sig != nil {
		// The consumer reads "stopped by SIGTERM" (not "context canceled"), and a
		// consumer busy in a training step does not hold the stop up.
		err, closeSink = sig, t.Stop
	}
	if cerr := closeSink(err); err == nil {
		err = cerr
	}
	if err == nil {
		fmt.Fprintf(stdout, "psiflow serve: %d batches sent, %d released\n", sent, released)
	}
	return err
}

func serveFolder(ctx context.Context, c serveConfig, t *sink.Torch, stdout io.Writer, accept func() error, pauses *pauseAnnouncer) error {
	// The memory runtime (elastic by default, with the gate) comes with the
	// pipeline; the batches go to the consumer before the file's sink.
	var rt *memory.Runtime
	hooks := pipelines.Hooks{
		Process: c.process, Option: c.option,
		Runtime: func(r *memory.Runtime) { rt = r },
		Batches: t.Consume,
		// collate writes each batch straight into a shared slot
		Destination: t,
		Info:        func(s string) { fmt.Fprintln(stdout, "  "+s) },
		Skipped:     func(node string, err error) { fmt.Fprintf(os.Stderr, "psiflow serve: %s: skipped: %v\n", node, err) },
		Ready:       accept,
		// With a sample cache each epoch says how much of it the cache served
		// (a second epoch from the cache said nothing).
		OnEpoch: func(n int, e progress.Epoch) {
			if e.CacheLookups > 0 {
				fmt.Fprintf(stdout, "psiflow serve: epoch %d: %d samples, %.0f samples/s, cache hits %.0f%% (%d of %d samples from the sample cache)\n",
					n+1, e.Items, e.Rate(), e.HitRate(), e.CacheHits, e.CacheLookups)
			}
		},
		// Each pause, resume and pause timeout also goes to the consumer (a
		// "pause" message): python/psiflow writes its line where the training
		// loop sees it, which this process's standard output is not.
		OnPause: pauses.announce,
	}
	if c.plan {
		// Each epoch's plan goes to the consumer before its batches
		// (python/psiflow's DataLoader takes len() and its state from it).
		src := c.p.Source.Config
		batch := 0
		for _, st := range c.p.Stages {
			if st.Kind.Name == "batch" {
				batch = int(st.Config.Int("size"))
			}
		}
		hooks.Plan = func(epoch int, sh source.Share) error {
			return t.Announce(ctx, "plan", servePlan{Epoch: epoch, Samples: sh.Samples, Rank: sh.Rank, WorldSize: sh.WorldSize,
				Start: sh.Start, Count: sh.Count, DropLast: sh.DropLast, Shuffle: src.Bool("shuffle"), Seed: uint64(src.Int("seed")), BatchSize: batch})
		}
	}
	if c.consumerEpochs {
		epoch := c.p.StartEpoch
		hooks.Next = func(ctx context.Context) (int, int64, bool, error) {
			sent, _ := t.Counts()
			if err := t.Announce(ctx, "epoch_end", serveEpochEnd{Epoch: epoch, Batches: sent}); err != nil {
				return 0, 0, false, err
			}
			r, err := t.Next(ctx)
			if err != nil {
				return 0, 0, false, err
			}
			epoch = r.Epoch
			return r.Epoch, r.Start, true, nil
		}
	}
	sum, err := pipelines.Run(ctx, c.p, hooks)
	if sec := sum.Elapsed.Seconds(); sec > 0 {
		fmt.Fprintf(stdout, "psiflow serve: %d samples in %d batches, %.1f s, %.0f samples/s\n", sum.Items, sum.Batches, sec, float64(sum.Items)/sec)
	}
	var hits, lookups int64
	for _, e := range sum.Epochs {
		hits, lookups = hits+e.CacheHits, lookups+e.CacheLookups
	}
	if lookups > 0 {
		fmt.Fprintf(stdout, "psiflow serve: sample cache: %d of %d samples served from it (%.0f%%) over %d epochs\n",
			hits, lookups, 100*float64(hits)/float64(lookups), len(sum.Epochs))
	}
	if rt != nil {
		if n, d := rt.PauseStats(); n > 0 {
			fmt.Fprintf(stdout, "psiflow serve: %s\n", memory.PauseSummary(n, d))
		}
	}
	return err
}

// servePlan is the "plan" message sent before each epoch's batches: this
// rank's share of the epoch (source.Share) and how it is batched.
type servePlan struct {
	Epoch     int    `json:"epoch"`
	Samples   int    `json:"samples"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	Start     int64  `json:"start"`
	Count     int64  `json:"count"`
	DropLast  bool   `json:"drop_last"`
	Shuffle   bool   `json:"shuffle"`
	Seed      uint64 `json:"seed"`
	BatchSize int    `json:"batch_size"`
}

// serveEpochEnd is the "epoch_end" message of -consumer-epochs: the epoch
// whose batches were all sent, and the batches sent so far in the run.
type serveEpochEnd struct {
	Epoch   int   `json:"epoch"`
	Batches int64 `json:"batches"`
}

// serveSynthetic sends c.synthetic batches whose byte j of sample i (counted
// across batches) is (i*31 + j*7 + j/251) % 253, label i % 3, key "s%06d" —
// what python/tests check.
func serveSynthetic(ctx context.Context, c serveConfig, t *sink.Torch, pauses *pauseAnnouncer) error {
	n, per := c.shape[0], 1
	for _, d := range c.shape[1:] {
		per *= d
	}
	for k := range c.synthetic {
		if c.failAfter > 0 && k == c.failAfter {
			return fmt.Errorf("synthetic failure after %d batches (-fail-after)", k)
		}
		if c.pauseAfter > 0 && k == c.pauseAfter {
			at := time.Now()
			r := pause.Reading{At: at, Current: 1 << 20, Limit: 256 << 20, Others: 239 << 20, Reserve: 16 << 20}
			pauses.announce(pause.Event{Kind: pause.Paused, Reading: r, Floor: 32 << 20, Hysteresis: 8 << 20, Timeout: pause.DefaultTimeout, Settle: pause.DefaultSettle})
			r.Current, r.Others = 100<<20, 140<<20
			pauses.announce(pause.Event{Kind: pause.Resumed, Reading: r, Floor: 32 << 20, Lasted: time.Second})
			pauses.flush()
		}
		b := &tensor.Batch{Tensor: tensor.Tensor{DType: tensor.Uint8, Shape: c.shape, U8: make([]byte, n*per)}}
		for i := range n {
			idx := k*n + i
			for j := range per {
				b.Tensor.U8[i*per+j] = byte((idx*31 + j*7 + j/251) % 253)
			}
			b.Keys = append(b.Keys, fmt.Sprintf("s%06d", idx))
			b.Labels = append(b.Labels, int64(idx%3))
		}
		if err := t.Consume(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// servePause is the "pause" message: a pause below the floor started
// ("paused"), ended ("resumed") or outlasted the pause timeout ("timed out"),
// with the line psiflow serve prints for it.
type servePause struct {
	Kind    string  `json:"kind"`
	Message string  `json:"message"`
	Lasted  float64 `json:"lasted_s"`
}

// pauseAnnouncer sends the memory runtime's pause events to the consumer from a
// goroutine of its own: the runtime calls OnPause from its headroom sampler,
// which must not wait for a consumer busy in a training step. Events before the
// consumer connected are kept (the last earlyKept of them) and sent when it
// connects, marked as earlier; events beyond a queue of 16 are only printed.
type pauseAnnouncer struct {
	ctx     context.Context
	t       *sink.Torch
	q       chan servePause
	wg      sync.WaitGroup
	flushed chan struct{}
	mu      sync.Mutex // q is closed under it
	done    bool
	// accepted: the consumer connected; before, events go to early (the
	// oldest dropped past earlyKept, counted in dropped).
	accepted bool
	early    []pause.Event
	dropped  int
}

// earlyKept is how many pause events from before the consumer connected are
// kept for it.
const earlyKept = 16

func newPauseAnnouncer(ctx context.Context, t *sink.Torch) *pauseAnnouncer {
	a := &pauseAnnouncer{ctx: ctx, t: t, q: make(chan servePause, 16+earlyKept), flushed: make(chan struct{}, 1)}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for m := range a.q {
			if m.Kind == "" {
				a.flushed <- struct{}{}
				continue
			}
			_ = a.t.Announce(a.ctx, "pause", m)
		}
	}()
	return a
}

func pauseMessage(ev pause.Event) servePause {
	return servePause{Kind: ev.Kind.String(), Message: ev.Message(), Lasted: ev.Lasted.Seconds()}
}

// announce queues ev for the consumer (or keeps it until it connects); it
// never waits.
func (a *pauseAnnouncer) announce(ev pause.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return
	}
	if !a.accepted {
		if len(a.early) == earlyKept {
			a.early = append(a.early[:0], a.early[1:]...)
			a.dropped++
		}
		a.early = append(a.early, ev)
		return
	}
	select {
	case a.q <- pauseMessage(ev):
	default:
	}
}

// connected is called once the consumer connected: the events kept from
// before go to it first, in order, each saying it came before the consumer
// connected (the first also how many older ones were not kept).
func (a *pauseAnnouncer) connected() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.accepted || a.done {
		return
	}
	a.accepted = true
	for i, ev := range a.early {
		m := pauseMessage(ev)
		note := "before this consumer connected"
		if i == 0 && a.dropped > 0 {
			note += fmt.Sprintf("; %d older pause messages not kept", a.dropped)
		}
		m.Message = "(" + note + ") " + m.Message
		select {
		case a.q <- m:
		default:
		}
	}
	a.early = nil
}

// flush waits until the events queued so far were sent (-pause-after).
func (a *pauseAnnouncer) flush() {
	a.q <- servePause{}
	<-a.flushed
}

// close sends what is queued and ends the goroutine.
func (a *pauseAnnouncer) close() {
	a.mu.Lock()
	if !a.done {
		a.done = true
		close(a.q)
	}
	a.mu.Unlock()
	a.wg.Wait()
}
