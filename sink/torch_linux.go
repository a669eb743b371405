//go:build linux

package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/tensor"
)

// Torch hands batches to the Python module python/psiflow through shared
// memory and a Unix socket; see the package documentation and docs/SINK.md.
type Torch struct {
	cfg  TorchConfig
	ln   *net.UnixListener
	conn *net.UnixConn

	fd        int    // memfd, -1 until the first batch
	mem       []byte // its mapping
	slotBytes int64
	budget    *flow.Budget
	free      chan int

	// gone is cancelled, with the reason as its cause, when the consumer
	// disconnects or breaks the protocol.
	gone     context.Context
	setGone  context.CancelCauseFunc
	readDone chan struct{}
	// refused is closed when the goroutine that turns away further clients
	// (started with the first one) has ended.
	refused chan struct{}
	// next holds the consumer's request for the next epoch (a "next"
	// message) until [Torch.Next] takes it.
	next chan EpochRequest

	setupMu sync.Mutex // the ring is made once, by Lend or Consume

	mu          sync.Mutex
	slots       int      // the ring's length, once made (setup)
	outstanding []int64  // bytes held per slot, 0 when free
	lent        []int64  // bytes lent per slot to a batch not yet consumed (Lend)
	lends       []uint64 // per slot, which Lend holds it: a release of an earlier lend of the slot does nothing
	sent        int64
	released    int64
	peerClosed  bool
	closing     bool

	once sync.Once
	cerr error
}

// Wire messages (JSON, one per SOCK_SEQPACKET message).
type torchMsg struct {
	T         string   `json:"t"`
	Version   int      `json:"version,omitempty"`
	Slots     int      `json:"slots,omitempty"`
	SlotBytes int64    `json:"slot_bytes,omitempty"`
	Seq       int64    `json:"seq,omitempty"`
	Slot      int      `json:"slot"`
	DType     string   `json:"dtype,omitempty"`
	Shape     []int    `json:"shape,omitempty"`
	Offset    int64    `json:"offset"`
	NBytes    int64    `json:"nbytes"`
	Labels    []int64  `json:"labels,omitempty"`
	Keys      []string `json:"keys,omitempty"`
	Batches   int64    `json:"batches,omitempty"`
	Message   string   `json:"message,omitempty"`
	Epoch     int      `json:"epoch,omitempty"`
	Start     int64    `json:"start,omitempty"`
}

// ProtocolVersion is the wire format's version, sent in the hello message.
const ProtocolVersion = 1

// NewTorch starts listening on cfg.Socket (unless cfg.ListenOnAccept: then
// the first Accept does). Nothing is mapped until the first batch.
func NewTorch(cfg TorchConfig) (*Torch, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// The slots go into free when the ring is made (setup): their number may
	// come from the first batch's size.
	t := &Torch{cfg: cfg, fd: -1, free: make(chan int, max(cfg.Slots, MaxAutoSlots)), next: make(chan EpochRequest, 1)}
	if !cfg.ListenOnAccept {
		if err := t.Listen(); err != nil {
			return nil, err
		}
	}
	t.gone, t.setGone = context.WithCancelCause(context.Background())
	return t, nil
}

// Listen creates the socket and listens on it, unless it does already: what
// NewTorch does without TorchConfig.ListenOnAccept, and Accept with it.
func (t *Torch) Listen() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln != nil {
		return nil
	}
	if t.closing {
		return errors.New("sink torch: closed")
	}
	ln, err := listenUnix("unixpacket", t.cfg.Socket)
	if err != nil {
		return fmt.Errorf("sink torch: %w", err)
	}
	t.ln = ln
	return nil
}

// Socket returns the path the sink listens on.
func (t *Torch) Socket() string { return t.cfg.Socket }

// Slots returns the ring's length: TorchConfig.Slots, or the number sized from
// the first batch when that is 0; 0 before the first batch.
func (t *Torch) Slots() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.slots
}

// Budget returns the budget that holds the bytes of batches outstanding in
// Python (nil before the first batch when the sink sizes its own).
func (t *Torch) Budget() *flow.Budget {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.budget
}

// Counts returns how many batches were sent and how many Python released.
func (t *Torch) Counts() (sent, released int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent, t.released
}

// Accept waits for the Python consumer to connect; Consume calls it when it
// has not been called. It gives up when ctx ends.
func (t *Torch) Accept(ctx context.Context) error {
	t.mu.Lock()
	connected, closing := t.conn != nil, t.closing
	t.mu.Unlock()
	if connected {
		return nil
	}
	if closing {
		return errors.New("sink torch: closed")
	}
	if err := t.Listen(); err != nil {
		return err
	}
	c, err := acceptUnix(ctx, t.ln)
	if err != nil {
		return fmt.Errorf("sink torch: socket %s: %w", t.cfg.Socket, err)
	}
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		c.Close()
		return errors.New("sink torch: closed")
	}
	t.conn = c
	t.readDone = make(chan struct{})
	t.refused = make(chan struct{})
	t.mu.Unlock()
	go t.readLoop()
	go t.refuseOthers()
	return nil
}

// refuseOthers turns away every client that connects after the first, at once
// and with a message (Python raises it), until the listener closes: the sink
// feeds one consumer, and a second one would otherwise wait for the whole run
// and then see its connection reset.
func (t *Torch) refuseOthers() {
	defer close(t.refused)
	msg, _ := json.Marshal(torchMsg{T: "error", Message: fmt.Sprintf(
		"psiflow: socket %s already has its consumer: one psiflow serve feeds one client (start one per rank or per DataLoader, each on its own socket)", t.cfg.Socket)})
	for {
		c, err := t.ln.AcceptUnix()
		if err != nil {
			return // the listener closed
		}
		_, _ = c.Write(msg)
		_ = c.CloseWrite()
		_ = c.Close()
	}
}

// ensure makes the ring, for batches of n bytes (what), unless it exists.
func (t *Torch) ensure(n int64, what string) error {
	t.setupMu.Lock()
	defer t.setupMu.Unlock()
	if t.mem != nil {
		return nil
	}
	return t.setup(n, what)
}

// setup maps the ring for batches of n bytes and sends the hello with its descriptor.
func (t *Torch) setup(n int64, what string) error {
	size := t.cfg.SlotBytes
	if size == 0 {
		size = n
	}
	page := int64(os.Getpagesize())
	size = (size + page - 1) / page * page
	if size <= 0 {
		return fmt.Errorf("sink torch: first batch has no bytes to size the slots from (%s)", what)
	}
	slots := t.cfg.Slots
	if slots == 0 {
		slots = autoSlots(size)
	}
	fd, err := unix.MemfdCreate("psiflow-batches", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("sink torch: memfd_create: %w", err)
	}
	total := size * int64(slots)
	if err := unix.Ftruncate(fd, total); err != nil {
		unix.Close(fd)
		return fmt.Errorf("sink torch: sizing the shared ring to %d bytes: %w", total, err)
	}
	mem, err := unix.Mmap(fd, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("sink torch: mapping the shared ring (%d bytes): %w", total, err)
	}
	t.mu.Lock()
	t.fd, t.mem, t.slotBytes, t.slots = fd, mem, size, slots
	t.outstanding = make([]int64, slots)
	t.lent = make([]int64, slots)
	t.lends = make([]uint64, slots)
	t.budget = t.cfg.Budget
	if t.budget == nil {
		b, err := flow.NewBudget(total)
		if err != nil {
			t.mu.Unlock()
			return t.lost(fmt.Errorf("sizing the ring's budget: %w", err))
		}
		t.budget = b
	}
	t.mu.Unlock()
	for i := range slots {
		t.free <- i
	}
	hello, _ := json.Marshal(torchMsg{T: "hello", Version: ProtocolVersion, Slots: slots, SlotBytes: size})
	if _, _, err := t.conn.WriteMsgUnix(hello, unix.UnixRights(fd), nil); err != nil {
		return t.lost(fmt.Errorf("sending the shared ring: %w", err))
	}
	return nil
}

// Announce sends the consumer one message of type kind whose "info" is v as
// JSON, before or between batches (psiflow serve announces each epoch's plan
// this way); it waits for the consumer to connect first. The protocol's own
// types (hello, batch, end, error) are refused.
func (t *Torch) Announce(ctx context.Context, kind string, v any) error {
	switch kind {
	case "", "hello", "batch", "end", "error", "release", "close", "next":
		return fmt.Errorf("sink torch: announce: %q is not a free message type", kind)
	}
	if err := t.Accept(ctx); err != nil {
		return err
	}
	msg, err := json.Marshal(struct {
		T    string `json:"t"`
		Info any    `json:"info"`
	}{kind, v})
	if err != nil {
		return fmt.Errorf("sink torch: announce %s: %w", kind, err)
	}
	if _, _, err := t.conn.WriteMsgUnix(msg, nil, nil); err != nil {
		return t.lost(fmt.Errorf("sending %s: %w", kind, err))
	}
	return nil
}

// awaitReader lets the reading side name a consumer that went away: a write that
// fails because the peer is gone (EPIPE, ECONNRESET) often fails before the read loop
// has seen the end of the connection, and the read loop's cause (closed on purpose,
// or disconnected without closing) is the one to report. It waits at most a few
// seconds: a dead peer's socket reads its end at once.
func (t *Torch) awaitReader(err error) {
	if !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
		return
	}
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-t.readDone:
	case <-timer.C:
	}
}

// lost records that the consumer is unreachable and returns the reason.
func (t *Torch) lost(err error) error {
	t.setGone(fmt.Errorf("sink torch: %w", err))
	return context.Cause(t.gone)
}

// takeSlot waits for a free slot and then for n bytes of the budget (the
// backpressure of Consume and Lend), giving the slot back when the budget is
// not granted. It fails when the consumer is gone or ctx ends.
func (t *Torch) takeSlot(ctx context.Context, n int64) (int, error) {
	var slot int
	select {
	case slot = <-t.free:
	case <-t.gone.Done():
		return 0, context.Cause(t.gone)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(t.gone, cancel)
	err := t.budget.Acquire(actx, n)
	stop()
	cancel()
	if err != nil {
		t.free <- slot
		if t.gone.Err() != nil {
			return 0, context.Cause(t.gone)
		}
		return 0, fmt.Errorf("sink torch: budget for a batch of %d bytes: %w", n, err)
	}
	return slot, nil
}

// Consume copies b into a free slot and announces it, waiting while every
// slot is in Python (backpressure). It fails when the consumer is gone:
// [ErrConsumerClosed] when it closed on purpose.
func (t *Torch) Consume(ctx context.Context, b *tensor.Batch) error {
	if err := t.Accept(ctx); err != nil {
		return err
	}
	if err := t.ensure(b.Size(), fmt.Sprintf("shape %v", b.Tensor.Shape)); err != nil {
		return err
	}
	raw := b.Tensor.Bytes()
	if slot, ok := t.lentSlot(raw); ok {
		// collated straight into the slot (Lend): nothing to copy
		return t.announce(b, slot, raw)
	}
	if int64(len(raw)) > t.slotBytes {
		return fmt.Errorf("sink torch: batch of %v %v is %d bytes, larger than a slot (%d bytes; set SlotBytes)", b.Tensor.DType, b.Tensor.Shape, len(raw), t.slotBytes)
	}
	if len(b.Labels) != 0 && len(b.Labels) != len(b.Keys) {
		return fmt.Errorf("sink torch: batch has %d keys and %d labels", len(b.Keys), len(b.Labels))
	}
	n := int64(len(raw))
	slot, err := t.takeSlot(ctx, n)
	if err != nil {
		return err
	}
	off := int64(slot) * t.slotBytes
	copy(t.mem[off:off+n], raw)
	t.mu.Lock()
	t.outstanding[slot] = n
	t.mu.Unlock()
	return t.announce(b, slot, raw)
}

// lentSlot reports whether raw starts a slot lent by Lend and not consumed.
func (t *Torch) lentSlot(raw []byte) (int, bool) {
	if len(raw) == 0 || len(t.mem) == 0 {
		return 0, false
	}
	p, base := uintptr(unsafe.Pointer(unsafe.SliceData(raw))), uintptr(unsafe.Pointer(unsafe.SliceData(t.mem)))
	if p < base || p >= base+uintptr(len(t.mem)) || (p-base)%uintptr(t.slotBytes) != 0 {
		return 0, false
	}
	slot := int((p - base) / uintptr(t.slotBytes))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lent[slot] == 0 || int64(len(raw)) > t.slotBytes {
		return 0, false
	}
	// the slot's lent bytes (budget held since Lend) become outstanding
	t.outstanding[slot], t.lent[slot] = t.lent[slot], 0
	return slot, true
}

// Lend gives a collate stage ([tensor.CollateInto]) a free slot of the
// shared ring for a batch of n bytes, so that the batch is written once,
// where Python reads it: Consume then announces the slot without copying.
// It waits while every slot is in Python (backpressure) and holds n bytes
// of the budget from now on. The release it returns gives the slot back
// when the batch is dropped before Consume took it; after Consume, Python's
// release does.
func (t *Torch) Lend(ctx context.Context, n int64) ([]byte, func(), error) {
	if err := t.Accept(ctx); err != nil {
		return nil, nil, err
	}
	if err := t.ensure(n, fmt.Sprintf("%d bytes", n)); err != nil {
		return nil, nil, err
	}
	if n > t.slotBytes || n <= 0 {
		return nil, nil, fmt.Errorf("sink torch: a batch of %d bytes does not fit a slot (%d bytes; set SlotBytes)", n, t.slotBytes)
	}
	slot, err := t.takeSlot(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	t.lent[slot] = n
	t.lends[slot]++
	lend := t.lends[slot]
	t.mu.Unlock()
	off := int64(slot) * t.slotBytes
	return t.mem[off : off+n : off+n], func() {
		t.mu.Lock()
		var held int64
		if t.lends[slot] == lend {
			// else the slot was consumed, released by Python and lent
			// again since: that lend's batch holds it now
			held, t.lent[slot] = t.lent[slot], 0
		}
		t.mu.Unlock()
		if held != 0 { // never consumed
			t.budget.Release(held)
			t.free <- slot
		}
	}, nil
}

// announce sends the batch message for b, whose bytes raw are in slot.
func (t *Torch) announce(b *tensor.Batch, slot int, raw []byte) error {
	off, n := int64(slot)*t.slotBytes, int64(len(raw))
	t.mu.Lock()
	t.sent++
	seq := t.sent
	t.mu.Unlock()
	m := torchMsg{T: "batch", Seq: seq, Slot: slot, DType: b.Tensor.DType.String(), Shape: b.Tensor.Shape,
		Offset: off, NBytes: n, Labels: b.Labels}
	if t.cfg.Keys {
		m.Keys = b.Keys
	}
	msg, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("sink torch: encoding batch %d: %w", seq, err)
	}
	if _, err := t.conn.Write(msg); err != nil {
		t.awaitReader(err)
		if t.gone.Err() != nil {
			return context.Cause(t.gone)
		}
		return t.lost(fmt.Errorf("sending batch %d: %w", seq, err))
	}
	return nil
}

// readLoop takes the consumer's releases and notices when it goes away.
func (t *Torch) readLoop() {
	defer close(t.readDone)
	buf := make([]byte, 4096)
	for {
		n, err := t.conn.Read(buf)
		if err != nil || n == 0 {
			t.mu.Lock()
			closing, peerClosed := t.closing, t.peerClosed
			sent, rel := t.sent, t.released
			t.mu.Unlock()
			switch {
			case closing:
				t.setGone(errors.New("sink torch: closed"))
			case peerClosed:
				t.setGone(fmt.Errorf("%w after %d batches", ErrConsumerClosed, sent))
			case err == nil || errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET):
				t.setGone(fmt.Errorf("sink torch: the Python consumer disconnected without closing (crashed or killed?) after %d batches, %d not released", sent, sent-rel))
			default:
				t.setGone(fmt.Errorf("sink torch: reading from the Python consumer: %w", err))
			}
			return
		}
		var m torchMsg
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			t.setGone(fmt.Errorf("sink torch: bad message from the Python consumer %q: %w", buf[:n], err))
			return
		}
		switch m.T {
		case "release":
			if err := t.release(m.Slot); err != nil {
				t.setGone(err)
				return
			}
		case "next":
			if m.Epoch < 0 || m.Start < 0 {
				t.setGone(fmt.Errorf("sink torch: the Python consumer asked for epoch %d from %d: want non-negative numbers", m.Epoch, m.Start))
				return
			}
			select {
			case t.next <- EpochRequest{Epoch: m.Epoch, Start: m.Start}:
			default:
				t.setGone(errors.New("sink torch: the Python consumer asked for the next epoch twice before it began"))
				return
			}
		case "close":
			// The consumer waits for the connection to close before it closes its
			// end (else the kernel resets the connection over the batches it did not
			// read): stop now, and keep reading until the sink closes.
			t.mu.Lock()
			t.peerClosed = true
			sent := t.sent
			t.mu.Unlock()
			t.setGone(fmt.Errorf("%w after %d batches", ErrConsumerClosed, sent))
		default:
			t.setGone(fmt.Errorf("sink torch: unknown message %q from the Python consumer", m.T))
			return
		}
	}
}

// Next waits for the consumer to ask for the next epoch (a "next" message,
// which python/psiflow's DataLoader sends at the start of each iteration after
// the first) and returns what it asked for. It fails when the consumer is
// gone ([ErrConsumerClosed] when it closed on purpose) or ctx ends.
func (t *Torch) Next(ctx context.Context) (EpochRequest, error) {
	if err := t.Accept(ctx); err != nil {
		return EpochRequest{}, err
	}
	select {
	case r := <-t.next:
		return r, nil
	case <-t.gone.Done():
		return EpochRequest{}, context.Cause(t.gone)
	case <-ctx.Done():
		return EpochRequest{}, ctx.Err()
	}
}

func (t *Torch) release(slot int) error {
	t.mu.Lock()
	if slot < 0 || slot >= len(t.outstanding) || t.outstanding[slot] == 0 {
		t.mu.Unlock()
		return fmt.Errorf("sink torch: the Python consumer released slot %d, which it does not hold", slot)
	}
	n := t.outstanding[slot]
	t.outstanding[slot] = 0
	t.released++
	t.mu.Unlock()
	t.budget.Release(n)
	t.free <- slot
	return nil
}

// Close tells the consumer how the stream ended (cause nil: "end"; otherwise
// "error" with cause's message, which Python raises), closes the connection
// and the ring, and returns every outstanding batch's bytes to the budget.
// Python keeps its own mapping of the ring until it closes it.
func (t *Torch) Close(cause error) error { return t.closeWithin(cause, t.cfg.closeWait()) }

// Stop is [Torch.Close] for a stream stopped from outside (a signal): it waits
// at most a second, not CloseWait, for the consumer to read cause and hang up,
// since a consumer in a long training step would hold the stop up that long.
func (t *Torch) Stop(cause error) error {
	return t.closeWithin(cause, min(t.cfg.closeWait(), time.Second))
}

func (t *Torch) closeWithin(cause error, wait time.Duration) error {
	t.once.Do(func() {
		t.mu.Lock()
		t.closing = true
		conn, sent := t.conn, t.sent
		t.mu.Unlock()
		var errs []error
		if conn != nil {
			if t.gone.Err() == nil {
				m := torchMsg{T: "end", Batches: sent}
				if cause != nil {
					m = torchMsg{T: "error", Message: cause.Error()}
				}
				msg, _ := json.Marshal(m)
				if _, err := conn.Write(msg); err == nil { // the consumer may have gone meanwhile
					// Let the consumer read the last message and hang up first: closing
					// with one of its releases unread would make the kernel reset the
					// connection before it reads "end".
					_ = conn.CloseWrite()
					select {
					case <-t.readDone:
					case <-time.After(wait):
					}
				}
			}
			errs = append(errs, conn.Close())
			<-t.readDone
		}
		t.setGone(errors.New("sink torch: closed"))
		t.mu.Lock()
		for i, n := range t.outstanding {
			if n > 0 {
				t.budget.Release(n)
				t.outstanding[i] = 0
			}
		}
		t.mu.Unlock()
		if t.mem != nil {
			errs = append(errs, unix.Munmap(t.mem))
			t.mem = nil
		}
		if t.fd >= 0 {
			errs = append(errs, unix.Close(t.fd))
			t.fd = -1
		}
		t.mu.Lock()
		ln := t.ln
		t.mu.Unlock()
		if ln != nil { // nil: never listened (ListenOnAccept, no Accept)
			errs = append(errs, closeListener(ln, t.cfg.Socket))
		}
		if t.refused != nil {
			<-t.refused
		}
		if err := errors.Join(errs...); err != nil {
			t.cerr = fmt.Errorf("sink torch: closing: %w", err)
		}
	})
	return t.cerr
}
