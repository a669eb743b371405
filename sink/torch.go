package sink

import (
	"errors"
	"time"

	"github.com/psiflow/psiflow/flow"
)

// TorchConfig configures a [Torch] sink.
type TorchConfig struct {
	// Socket is the Unix socket path to listen on (SOCK_SEQPACKET). A stale
	// socket file is replaced; the file is removed when the sink closes.
	Socket string
	// Slots is how many batches may be outstanding in Python at once (the
	// shared-memory ring's length); 0 sizes the ring from the first batch:
	// as many slots as fit in [AutoRingBytes], at least [MinAutoSlots] and at
	// most [MaxAutoSlots] (4 slots of a 9.6 MB uint8 batch of 64 224×224 images,
	// 2 of its 38.5 MB float32 twin). At least 2 lets Go fill one slot while
	// Python trains on another.
	Slots int
	// SlotBytes is each slot's size; 0 sizes the slots from the first batch's
	// tensor (rounded up to a page). A later batch larger than a slot is an error.
	SlotBytes int64
	// Budget, when not nil, holds the bytes of every batch outstanding in Python
	// until Python releases it (a graph's budget, to make Python's batches count
	// against it: size it for Slots more batches). Nil: the sink's own budget of
	// Slots × SlotBytes, reported by [Torch.Budget].
	Budget *flow.Budget
	// Keys sends each sample's key (its file path) with the batch.
	Keys bool
	// ListenOnAccept makes [NewTorch] leave the socket uncreated: the first
	// [Torch.Accept] (or Consume) creates it and listens. A server with
	// start-up checks sets it so that no client can connect to it (the kernel
	// queues a connection on a listening socket before it is accepted) until
	// they passed; a bad socket path is then also reported only at Accept.
	ListenOnAccept bool
	// CloseWait is how long Close waits for the consumer to hang up after the
	// last message; 0 means 5 s.
	CloseWait time.Duration
}

// The ring's length when TorchConfig.Slots is 0: AutoRingBytes / the slot's
// size, within [MinAutoSlots, MaxAutoSlots]. Measured in a training loop on 2
// cores (docs/BENCHMARKS.md), 2 slots of float32 batches were as fast as 4 and
// 80 MiB smaller; small batches keep 4, which cost little.
const (
	AutoRingBytes = 64 << 20
	MinAutoSlots  = 2
	MaxAutoSlots  = 4
)

// autoSlots is the ring's length for slots of size bytes when Slots is 0.
func autoSlots(size int64) int {
	if size <= 0 {
		return MaxAutoSlots
	}
	return int(min(max(AutoRingBytes/size, MinAutoSlots), MaxAutoSlots))
}

func (c TorchConfig) closeWait() time.Duration {
	if c.CloseWait > 0 {
		return c.CloseWait
	}
	return 5 * time.Second
}

// ErrConsumerClosed ends Consume when the Python consumer closed the
// connection on purpose (it stopped iterating, or called close): a clean stop
// for the caller to tell apart from a failure with errors.Is.
var ErrConsumerClosed = errors.New("sink torch: the Python consumer closed the connection")

// EpochRequest is the consumer's request for its next epoch ([Torch.Next]):
// the epoch's number (it selects the shuffle) and the position it starts at
// (samples consumed by all ranks together).
type EpochRequest struct {
	Epoch int
	Start int64
}

func (c *TorchConfig) validate() error {
	switch {
	case c.Socket == "":
		return errors.New("sink torch: no socket path given")
	case c.Slots < 0:
		return errors.New("sink torch: slots must be 0 (sized from the first batch) or more")
	case c.SlotBytes < 0:
		return errors.New("sink torch: slot bytes must be 0 (from the first batch) or more")
	}
	return nil
}
